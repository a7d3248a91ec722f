package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/server/store"
)

func TestLabOwners(t *testing.T) { testLabOwners(t, sqliteOpener(t)) }

func testLabOwners(t *testing.T, open opener) {
	ctx := ctxT(t)
	s := open(t)
	defer s.Close()
	a := newUser(t, s, "a@example.com")
	for _, bad := range []store.LabOwner{{LabID: "", LearnerID: a.ID, Replica: "http://a"}, {LabID: "l1", LearnerID: a.ID, Replica: " "}} {
		if err := s.ClaimLab(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ClaimLab(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := s.ClaimLab(ctx, &store.LabOwner{LabID: "l1", LearnerID: 9999, Replica: "http://a"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown learner: %v, want ErrNotFound", err)
	}
	if _, err := s.LabOwner(ctx, "l1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LabOwner of an unrecorded lab: %v, want ErrNotFound", err)
	}
	before := time.Now()
	claim := func(o store.LabOwner) error {
		t.Helper()
		return s.ClaimLab(ctx, &o)
	}
	if err := claim(store.LabOwner{LabID: "l1", LearnerID: a.ID, Replica: "http://10.0.0.1:8081", Scenario: "ch01-tour"}); err != nil {
		t.Fatal(err)
	}
	// While l1 runs, a's second claim, on any replica, records nothing.
	if err := claim(store.LabOwner{LabID: "l2", LearnerID: a.ID, Replica: "http://10.0.0.2:8082"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a second running lab: %v, want ErrExists", err)
	}
	if _, err := s.LabOwner(ctx, "l2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused claim is recorded: %v", err)
	}
	o, err := s.LabOwner(ctx, "l1")
	if err != nil || o.LearnerID != a.ID || o.Replica != "http://10.0.0.1:8081" || o.Scenario != "ch01-tour" || o.Attempt != 0 ||
		o.StartedAt.Before(before.Add(-time.Second)) || !o.EndedAt.IsZero() {
		t.Fatalf("LabOwner = %+v, %v; want a's running ch01-tour on the first replica", o, err)
	}
	running := func(want ...string) {
		t.Helper()
		got, err := s.RunningLabs(ctx, a.ID)
		var ids []string
		for _, o := range got {
			ids = append(ids, o.LabID)
		}
		if err != nil || strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("RunningLabs = %v, %v; want %v", ids, err, want)
		}
	}
	running("l1")
	if err := s.EndLab(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	if o, err := s.LabOwner(ctx, "l1"); err != nil || o.EndedAt.IsZero() {
		t.Errorf("LabOwner after EndLab = %+v, %v; want an end", o, err)
	}
	running()
	// l1 ended, an exam's lab may run.
	if err := claim(store.LabOwner{LabID: "l2", LearnerID: a.ID, Replica: "http://10.0.0.2:8082", Scenario: "ch08-link-loss", Attempt: 5, Task: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RunningLabs(ctx, a.ID); err != nil || len(got) != 1 || got[0].Attempt != 5 || got[0].Task != 1 || got[0].Scenario != "ch08-link-loss" {
		t.Errorf("RunningLabs = %+v, %v; want l2, task 1 of attempt 5", got, err)
	}

	// A workshop's labs are its members' running labs: b's only, b alone a member.
	b := newUser(t, s, "b@example.com")
	if err := claim(store.LabOwner{LabID: "lb", LearnerID: b.ID, Replica: "http://10.0.0.2:8082"}); err != nil {
		t.Fatal(err)
	}
	w := &store.Workshop{InstructorID: a.ID, Title: "w", Code: "OWNERS", Labs: []string{"x"}, LabTTL: time.Hour, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	if err := s.CreateWorkshop(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := s.JoinWorkshop(ctx, w.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkshopLabs(ctx, w.ID); err != nil || len(got) != 1 || got[0].LabID != "lb" || got[0].Replica != "http://10.0.0.2:8082" {
		t.Errorf("WorkshopLabs = %+v, %v; want b's lb", got, err)
	}
	// The second replica goes: a's l2 and b's lb end; a's next lab runs on the third.
	if err := s.EndReplicaLabs(ctx, "http://10.0.0.2:8082"); err != nil {
		t.Fatal(err)
	}
	if o, err := s.LabOwner(ctx, "lb"); err != nil || o.EndedAt.IsZero() {
		t.Errorf("b's lab on the ended replica = %+v, %v; want an end", o, err)
	}
	if err := claim(store.LabOwner{LabID: "l3", LearnerID: a.ID, Replica: "http://10.0.0.3:8083"}); err != nil {
		t.Fatal(err)
	}
	running("l3")

	if n, err := s.DeleteLabOwners(ctx, before.Add(-time.Minute)); err != nil || n != 0 {
		t.Errorf("DeleteLabOwners(a minute before the start) = %d, %v; want 0", n, err)
	}
	if n, err := s.DeleteLabOwners(ctx, time.Now().Add(time.Second)); err != nil || n != 4 {
		t.Errorf("DeleteLabOwners(now) = %d, %v; want 4", n, err)
	}
	if _, err := s.LabOwner(ctx, "l1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LabOwner after delete: %v, want ErrNotFound", err)
	}
	testClaimRace(t, s)
}

// testClaimRace: one learner's claims made at once, as by replicas that
// each saw no running lab: exactly one wins.
func testClaimRace(t *testing.T, s store.DB) {
	ctx := ctxT(t)
	u := newUser(t, s, "race@example.com")
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.ClaimLab(ctx, &store.LabOwner{LabID: fmt.Sprintf("race-%d", i), LearnerID: u.ID, Replica: fmt.Sprintf("http://10.0.0.%d:8080", i%2+1)})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrExists):
			t.Errorf("claim %d: %v, want nil or ErrExists", i, err)
		}
	}
	if got, err := s.RunningLabs(ctx, u.ID); won != 1 || err != nil || len(got) != 1 {
		t.Errorf("%d of %d claims won, running %+v (%v); want exactly one", won, n, got, err)
	}
}
