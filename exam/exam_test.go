package exam

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/scenarios/exams"
)

func fixtures(t *testing.T) (*scenarios.Catalog, *course.Course) {
	t.Helper()
	cat, probs := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	if cat == nil {
		t.Fatalf("scenarios: %v", probs)
	}
	crs, cprobs := course.Load(course.Embedded(), course.Options{LabExists: func(string) bool { return true }})
	if crs == nil {
		t.Fatalf("course: %v", cprobs)
	}
	return cat, crs
}

func shipped(t *testing.T) (*Set, *Exam) {
	t.Helper()
	cat, crs := fixtures(t)
	set, errs := Load(exams.Embedded(), ".", cat, crs)
	if len(errs) > 0 {
		t.Fatalf("shipped exams: %v", errs)
	}
	e, ok := set.Get("m12")
	if !ok {
		t.Fatal("no exam m12")
	}
	return set, e
}

func TestShippedExam(t *testing.T) {
	set, e := shipped(t)
	if e.TimeLimit != 90*time.Minute || e.Labs() < 6 || e.Labs() > 8 || e.Title != "commlab 认证：多卡通信故障诊断（模块 1–2）" {
		t.Errorf("m12: limit %v, %d labs, title %q", e.TimeLimit, e.Labs(), e.Title)
	}
	tasks := set.Tasks(e, NewSeed())
	positions := map[string]bool{}
	for _, tk := range tasks {
		if !tk.Lab() {
			continue
		}
		s, _ := set.cat.Get(tk.Scenario)
		for _, tag := range Tags(s) {
			if strings.HasPrefix(tag, "position:") {
				positions[tag] = true
			}
			if tag == "env:gpu" {
				t.Errorf("task %d draws GPU lab %s", tk.Index, s.ID)
			}
		}
	}
	if len(positions) != 5 {
		t.Errorf("labs cover positions %v, want ①–④ and the host/software faults", positions)
	}
	// The tour's task text walks through its diagnosis: no pool may draw it.
	for _, sec := range e.Sections {
		for _, p := range sec.Draw {
			if cands, _ := p.candidates(set.cat, set.crs); slices.Contains(cands, "ch01-tour") {
				t.Errorf("section %s draws from %v, which has the tutorial ch01-tour", sec.ID, cands)
			}
		}
	}
	if last := tasks[len(tasks)-1]; last.Lab() || len(last.Questions) != 6 {
		t.Errorf("last task %+v, want the 6 theory questions", last)
	}
}

// The same seed gives the same tasks (a restart loses nothing); seeds of two
// candidates give different labs or variants.
func TestDrawBySeed(t *testing.T) {
	set, e := shipped(t)
	seed := NewSeed()
	a, b := set.Tasks(e, seed), set.Tasks(e, seed)
	if len(a) != len(b) {
		t.Fatal("same seed, different task counts")
	}
	for i := range a {
		if a[i].Scenario != b[i].Scenario || a[i].Seed != b[i].Seed {
			t.Fatalf("task %d differs for the same seed: %+v vs %+v", i, a[i], b[i])
		}
	}
	differs := 0
	for range 20 {
		other := set.Tasks(e, NewSeed())
		for i := range a {
			if !a[i].Lab() {
				continue
			}
			va, _ := a[i].Variant(set.cat)
			vo, _ := other[i].Variant(set.cat)
			if a[i].Scenario != other[i].Scenario || describe(va.Values) != describe(vo.Values) {
				differs++
				break
			}
		}
	}
	if differs < 19 {
		t.Errorf("only %d of 20 other seeds gave a different attempt", differs)
	}
}

func describe(m map[string]string) string {
	var b strings.Builder
	for _, k := range []string{"node", "nic", "percent", "rate", "mtu", "port"} {
		b.WriteString(k + "=" + m[k] + ";")
	}
	for k, v := range m {
		b.WriteString(k + v)
	}
	return b.String()
}

func TestScoreAndBands(t *testing.T) {
	set, e := shipped(t)
	tasks := set.Tasks(e, NewSeed())
	all := map[int]TaskScore{}
	for _, tk := range tasks {
		all[tk.Index] = TaskScore{Score: 1}
	}
	if s := e.Score(tasks, all); s < 0.999 || !e.Passed(s) || e.BandOf(s) != "distinction" {
		t.Errorf("all right: score %v band %s", s, e.BandOf(s))
	}
	if s := e.Score(tasks, nil); s != 0 || e.Passed(s) {
		t.Errorf("nothing graded: score %v", s)
	}
	// Labs only, every one with one hint, in an exam whose hints cost 10 %: 0.8 × 0.9.
	// (m12 itself offers none.)
	hinted := *e
	hinted.Hints = Hints{Allowed: true, Cost: 0.1}
	e = &hinted
	labs := map[int]TaskScore{}
	for _, tk := range tasks {
		if tk.Lab() {
			labs[tk.Index] = TaskScore{Score: 1, Hints: 1}
		}
	}
	if s := e.Score(tasks, labs); s < 0.719 || s > 0.721 || e.BandOf(s) != "pass" {
		t.Errorf("labs with a hint each: score %v band %s, want 0.72 pass", s, e.BandOf(s))
	}
}

func TestMayStart(t *testing.T) {
	_, e := shipped(t)
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	tests := []struct {
		ended []time.Time
		ok    bool
	}{
		{nil, true},
		{[]time.Time{now.Add(-25 * time.Hour)}, true},
		{[]time.Time{now.Add(-time.Hour)}, false},
		{[]time.Time{now.Add(-100 * time.Hour), now.Add(-90 * time.Hour), now.Add(-80 * time.Hour)}, false},
	}
	for _, tt := range tests {
		if err := e.MayStart(tt.ended, now); (err == nil) != tt.ok {
			t.Errorf("MayStart(%v) = %v, want ok=%v", tt.ended, err, tt.ok)
		}
	}
}

func TestValidation(t *testing.T) {
	cat, crs := fixtures(t)
	good := `id: x1
title: T
time_limit: 30m
pass: 0.5
attempts: 1
sections:
  - id: labs
    weight: 1
    draw:
      - count: 1
        chapters: [ch08]
`
	if _, errs := Parse("x1.yaml", []byte(good), cat, crs); len(errs) > 0 {
		t.Fatalf("good exam: %v", errs)
	}
	tests := []struct{ name, from, to, want string }{
		{"unknown field", "pass: 0.5", "pass: 0.5\ncolour: red", "x1.yaml:5:"},
		{"pass mark", "pass: 0.5", "pass: 1.5", "x1.yaml:4:7: pass 1.5"},
		{"time limit", "30m", "1m", "x1.yaml:3:13: time_limit"},
		{"pool too small", "count: 1", "count: 9", "x1.yaml:10:16: count 9: the pool has 4 scenario(s)"},
		{"no chapter", "[ch08]", "[ch99]", `no chapter "ch99"`},
		{"weights", "weight: 1", "weight: 0.5", "x1.yaml:7:3: section weights add up to 0.5"},
		{"question", "    draw:\n      - count: 1\n        chapters: [ch08]\n", "    questions: [ch04/q99]\n", `x1.yaml:9:17: question "ch04/q99": the quiz of ch04 has no question q99`},
		{"overlap", "        chapters: [ch08]\n", "        chapters: [ch08]\n      - count: 1\n        tags: [class:link-loss]\n", "pools must not overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(good, tt.from, tt.to, 1)
			_, errs := Parse("x1.yaml", []byte(src), cat, crs)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("problems %q, want one containing %q", got, tt.want)
			}
		})
	}
}
