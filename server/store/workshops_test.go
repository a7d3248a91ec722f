package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/commlab/commlab/server/store"
)

func TestWorkshops(t *testing.T) { testWorkshops(t, sqliteOpener(t)) }

func testWorkshops(t *testing.T, open opener) {
	ctx := ctxT(t)
	s := open(t)
	defer s.Close()
	inst, a, b := newUser(t, s, "i@example.com"), newUser(t, s, "a@example.com"), newUser(t, s, "b@example.com")
	start := time.Now().UTC().Truncate(time.Second)
	valid := func() *store.Workshop {
		return &store.Workshop{InstructorID: inst.ID, Title: "NCCL day", Code: "ab-12 cd", Labs: []string{"ch08-link-loss", "ch01-tour"},
			LabTTL: 40 * time.Minute, StartsAt: start, EndsAt: start.Add(4 * time.Hour)}
	}
	for _, tc := range []struct {
		name string
		edit func(*store.Workshop)
	}{
		{"no title", func(w *store.Workshop) { w.Title = " " }},
		{"no code", func(w *store.Workshop) { w.Code = " - " }},
		{"no labs", func(w *store.Workshop) { w.Labs = nil }},
		{"short ttl", func(w *store.Workshop) { w.LabTTL = time.Second }},
		{"ends before start", func(w *store.Workshop) { w.EndsAt = w.StartsAt }},
		{"opened past the end", func(w *store.Workshop) { w.Opened = 3 }},
	} {
		w := valid()
		tc.edit(w)
		if err := s.CreateWorkshop(ctx, w); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	w := valid()
	if err := s.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.Code != "AB12CD" {
		t.Errorf("code stored as %q", w.Code)
	}
	if err := s.CreateWorkshop(ctx, valid()); !errors.Is(err, store.ErrExists) {
		t.Errorf("same code again: %v, want ErrExists", err)
	}
	got, err := s.WorkshopByCode(ctx, " ab12-cd")
	if err != nil || got.ID != w.ID || len(got.Labs) != 2 || got.Labs[1] != "ch01-tour" || got.LabTTL != 40*time.Minute || !got.StartsAt.Equal(start) || got.Ended() {
		t.Fatalf("WorkshopByCode = %+v, %v", got, err)
	}
	if _, err := s.WorkshopByCode(ctx, "NOPE"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown code: %v", err)
	}

	for _, u := range []int64{b.ID, a.ID, b.ID} {
		if err := s.JoinWorkshop(ctx, w.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.JoinWorkshop(ctx, w.ID, 9999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("join by unknown user: %v", err)
	}
	if m, err := s.Members(ctx, w.ID); err != nil || len(m) != 2 || m[0] != b.ID || m[1] != a.ID {
		t.Errorf("Members = %v, %v; want [b a]", m, err)
	}
	// The roster: members in the order they joined, with their records in the
	// workshop's labs only (a's lab outside it and the instructor's own stay out).
	for _, r := range []struct {
		u      *store.User
		lab    string
		score  float64
		passed bool
	}{
		{a, "ch08-link-loss", 0.4, false}, {a, "ch08-link-loss", 0.9, true}, {a, "ch02-other", 1, true},
		{inst, "ch01-tour", 1, true}, {b, "ch01-tour", 0.5, false},
	} {
		if err := s.RecordLab(ctx, r.u.ID, r.lab[:4], r.lab, r.score, r.passed); err != nil {
			t.Fatal(err)
		}
	}
	want := []store.Member{
		{ID: b.ID, Name: b.Name, Labs: map[string]store.LabProgress{"ch01-tour": {Score: 0.5, Attempts: 1}}},
		{ID: a.ID, Name: a.Name, Labs: map[string]store.LabProgress{"ch08-link-loss": {Passed: true, Score: 0.9, Attempts: 2}}},
	}
	if got, err := s.Roster(ctx, w); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Roster = %+v, %v; want %+v", got, err, want)
	}
	c := newUser(t, s, "c@example.com")
	if err := s.JoinWorkshop(ctx, w.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Roster(ctx, w); err != nil || len(got) != 3 || got[2].ID != c.ID || got[2].Labs != nil {
		t.Errorf("Roster with a member who did nothing = %+v, %v", got, err)
	}
	for _, u := range []int64{inst.ID, a.ID} {
		if ws, err := s.WorkshopsOf(ctx, u); err != nil || len(ws) != 1 || ws[0].ID != w.ID {
			t.Errorf("WorkshopsOf(%d) = %v, %v", u, ws, err)
		}
	}

	if err := s.OpenLabs(ctx, w.ID, 3); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("open 3 of 2: %v", err)
	}
	if err := s.OpenLabs(ctx, w.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.EndWorkshop(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Workshop(ctx, w.ID)
	time.Sleep(2 * time.Millisecond)
	_ = s.EndWorkshop(ctx, w.ID)
	again, _ := s.Workshop(ctx, w.ID)
	if first.Opened != 1 || !first.Ended() || !again.EndedAt.Equal(first.EndedAt) {
		t.Errorf("after open+end: opened %d, ended %v then %v", first.Opened, first.EndedAt, again.EndedAt)
	}

	for _, e := range []store.WorkshopEvent{
		{WorkshopID: w.ID, Kind: "message", Public: "hello all"},
		{WorkshopID: w.ID, LearnerID: a.ID, Kind: "fault", Public: "changed", Secret: "loss node2"},
		{WorkshopID: w.ID, LearnerID: b.ID, Kind: "fault", Public: "changed", Secret: "loss node3"},
	} {
		if err := s.LogWorkshopEvent(ctx, &e); err != nil || e.ID == 0 {
			t.Fatal(e, err)
		}
	}
	if err := s.LogWorkshopEvent(ctx, &store.WorkshopEvent{WorkshopID: w.ID}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("event without kind: %v", err)
	}
	all, _ := s.WorkshopEvents(ctx, w.ID, 0)
	mine, _ := s.WorkshopEvents(ctx, w.ID, a.ID)
	if len(all) != 3 || len(mine) != 2 || mine[1].Secret != "loss node2" || mine[1].LearnerID != a.ID || mine[0].LearnerID != 0 {
		t.Errorf("events: all %+v, a's %+v", all, mine)
	}
}
