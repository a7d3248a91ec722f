package server

import (
	"testing"
	"time"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
)

func TestChapterStatus(t *testing.T) {
	crs, probs := course.Load(course.Embedded(), course.Options{})
	if crs == nil {
		t.Fatal(probs)
	}
	ch8, _ := crs.Chapter("ch08")
	if len(ch8.Labs) < 2 {
		t.Fatalf("ch08 has %d labs; this test needs a chapter with several", len(ch8.Labs))
	}
	one := map[string]store.LabProgress{ch8.Labs[0]: {Passed: true, Score: 1, Attempts: 1}, ch8.Labs[1]: {Score: 0.2, Attempts: 3}}
	all := map[string]store.LabProgress{}
	for _, l := range ch8.Labs {
		all[l] = store.LabProgress{Passed: true, Score: 0.8, Attempts: 1}
	}
	tests := []struct {
		name                    string
		p                       store.Progress
		studied, labsDone, done bool
		labsPassed              int
	}{
		{"nothing", store.Progress{}, false, false, false, 0},
		{"read", store.Progress{Read: true}, true, false, false, 0},
		{"quiz failed", store.Progress{QuizScore: 0.3}, false, false, false, 0},
		{"quiz passed", store.Progress{QuizPassed: true}, true, false, false, 0},
		{"one lab of four", store.Progress{Labs: one, LabPassed: true}, true, false, false, 1},
		{"every lab, no quiz", store.Progress{Labs: all}, true, true, false, len(ch8.Labs)},
		{"everything", store.Progress{Labs: all, QuizPassed: true}, true, true, true, len(ch8.Labs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := statusOf(ch8, tt.p)
			if st.Studied != tt.studied || st.LabsDone() != tt.labsDone || st.Complete() != tt.done || st.LabsPassed != tt.labsPassed || st.LabsTotal != len(ch8.Labs) {
				t.Errorf("studied %v, labs %d/%d done %v, complete %v; want %v, %d/%d %v, %v",
					st.Studied, st.LabsPassed, st.LabsTotal, st.LabsDone(), st.Complete(), tt.studied, tt.labsPassed, len(ch8.Labs), tt.labsDone, tt.done)
			}
		})
	}
}

func TestContinueFrom(t *testing.T) {
	crs, probs := course.Load(course.Embedded(), course.Options{})
	if crs == nil {
		t.Fatal(probs)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	complete := func(id string, at time.Time) store.Progress {
		ch, _ := crs.Chapter(id)
		p := store.Progress{ChapterID: id, Read: true, QuizPassed: true, UpdatedAt: at, Labs: map[string]store.LabProgress{}}
		for _, l := range ch.Labs {
			p.Labs[l] = store.LabProgress{Passed: true, Attempts: 1}
		}
		return p
	}
	var written []string
	for _, ch := range crs.Chapters() {
		if ch.Written() {
			written = append(written, ch.ID)
		}
	}
	last := written[len(written)-1]
	everything := map[string]store.Progress{}
	for i, id := range written {
		everything[id] = complete(id, t0.Add(time.Duration(i)*time.Hour))
	}
	tests := []struct {
		name    string
		prog    map[string]store.Progress
		want    string // "" for none
		started bool
	}{
		{"new learner", nil, "ch01", false},
		{"ch01 read, quiz not passed", map[string]store.Progress{"ch01": {Read: true, UpdatedAt: t0}}, "ch01", true},
		{"ch01 complete", map[string]store.Progress{"ch01": complete("ch01", t0)}, "ch02", true},
		{"latest wins", map[string]store.Progress{"ch01": {Read: true, UpdatedAt: t0}, "ch03": {QuizScore: 0.2, UpdatedAt: t0.Add(time.Hour)}}, "ch03", true},
		{"wraps to an earlier gap", map[string]store.Progress{"ch01": {Read: true, UpdatedAt: t0}, last: complete(last, t0.Add(time.Hour))}, "ch01", true},
		{"all complete", everything, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := map[string]chapterStatus{}
			for _, ch := range crs.Chapters() {
				prog[ch.ID] = statusOf(ch, tt.prog[ch.ID])
			}
			got := continueFrom(crs, prog)
			switch {
			case tt.want == "" && got != nil:
				t.Errorf("continue at %s, want none", got.Chapter.ID)
			case tt.want != "" && (got == nil || got.Chapter.ID != tt.want || got.Started != tt.started):
				t.Errorf("continue at %+v, want %s (started %v)", got, tt.want, tt.started)
			}
		})
	}
}
