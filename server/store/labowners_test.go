package store_test

import (
	"errors"
	"strings"
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
		if err := s.SetLabOwner(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SetLabOwner(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := s.SetLabOwner(ctx, &store.LabOwner{LabID: "l1", LearnerID: 9999, Replica: "http://a"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown learner: %v, want ErrNotFound", err)
	}
	if _, err := s.LabOwner(ctx, "l1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LabOwner of an unrecorded lab: %v, want ErrNotFound", err)
	}
	before := time.Now()
	for _, replica := range []string{"http://10.0.0.1:8081", "http://10.0.0.2:8082"} {
		if err := s.SetLabOwner(ctx, &store.LabOwner{LabID: "l1", LearnerID: a.ID, Replica: replica}); err != nil {
			t.Fatal(err)
		}
	}
	o, err := s.LabOwner(ctx, "l1")
	if err != nil || o.LearnerID != a.ID || o.Replica != "http://10.0.0.2:8082" || o.StartedAt.Before(before.Add(-time.Second)) {
		t.Fatalf("LabOwner = %+v, %v; want learner %d on the second replica (the last claim)", o, err, a.ID)
	}
	if !o.EndedAt.IsZero() {
		t.Errorf("a new lab is ended: %+v", o)
	}

	// Running labs: l1 and l2 on one replica, l3 on another; ending one, then
	// the first replica's, leaves l3.
	b := newUser(t, s, "b@example.com")
	for _, o := range []store.LabOwner{{LabID: "l2", LearnerID: a.ID, Replica: "http://10.0.0.2:8082"},
		{LabID: "l3", LearnerID: a.ID, Replica: "http://10.0.0.3:8083"}, {LabID: "lb", LearnerID: b.ID, Replica: "http://10.0.0.2:8082"}} {
		if err := s.SetLabOwner(ctx, &o); err != nil {
			t.Fatal(err)
		}
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
	running("l1", "l2", "l3")
	// A workshop's labs are its members' running labs: b's only, b alone a member.
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
	if err := s.EndLab(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	running("l2", "l3")
	if o, err := s.LabOwner(ctx, "l1"); err != nil || o.EndedAt.IsZero() {
		t.Errorf("LabOwner after EndLab = %+v, %v; want an end", o, err)
	}
	if err := s.EndReplicaLabs(ctx, "http://10.0.0.2:8082"); err != nil {
		t.Fatal(err)
	}
	running("l3")
	if o, err := s.LabOwner(ctx, "lb"); err != nil || o.EndedAt.IsZero() {
		t.Errorf("b's lab on the ended replica = %+v, %v; want an end", o, err)
	}

	if n, err := s.DeleteLabOwners(ctx, before.Add(-time.Minute)); err != nil || n != 0 {
		t.Errorf("DeleteLabOwners(a minute before the start) = %d, %v; want 0", n, err)
	}
	if n, err := s.DeleteLabOwners(ctx, time.Now().Add(time.Second)); err != nil || n != 4 {
		t.Errorf("DeleteLabOwners(now) = %d, %v; want 4", n, err)
	}
	if _, err := s.LabOwner(ctx, "l1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LabOwner after delete: %v, want ErrNotFound", err)
	}
}
