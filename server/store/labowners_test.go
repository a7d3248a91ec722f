package store_test

import (
	"errors"
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
	if n, err := s.DeleteLabOwners(ctx, before.Add(-time.Minute)); err != nil || n != 0 {
		t.Errorf("DeleteLabOwners(a minute before the start) = %d, %v; want 0", n, err)
	}
	if n, err := s.DeleteLabOwners(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Errorf("DeleteLabOwners(now) = %d, %v; want 1", n, err)
	}
	if _, err := s.LabOwner(ctx, "l1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LabOwner after delete: %v, want ErrNotFound", err)
	}
}
