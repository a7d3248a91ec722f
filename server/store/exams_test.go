package store_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/commlab/commlab/server/store"
)

// opener opens the same database on every call.
type opener func(t *testing.T) store.DB

func sqliteOpener(t *testing.T) opener {
	path := filepath.Join(t.TempDir(), "commlab.db")
	return func(t *testing.T) store.DB { return openT(t, path) }
}

func TestCertificates(t *testing.T) { testCertificates(t, sqliteOpener(t)) }

func TestAttempts(t *testing.T) { testAttempts(t, sqliteOpener(t)) }

func TestExamSwitches(t *testing.T) { testExamSwitches(t, sqliteOpener(t)) }

// testExamSwitches: an exam is enabled until switched; the last switch wins,
// keeps who and when, and survives a reopen.
func testExamSwitches(t *testing.T, open opener) {
	ctx := ctxT(t)
	s := open(t)
	admin := newUser(t, s, "admin@example.com")
	if sw, err := s.ExamSwitches(ctx); err != nil || len(sw) != 0 {
		t.Fatalf("fresh switches = %v, %v; want none", sw, err)
	}
	before := time.Now().Add(-time.Second)
	steps := []store.ExamSwitch{
		{ExamID: "m12", Disabled: true, Note: "closed today", By: admin.ID},
		{ExamID: "m12", Disabled: false, By: admin.ID},
		{ExamID: "m34", Disabled: true, Note: "  考场维护，明天恢复  ", By: admin.ID},
	}
	for _, sw := range steps {
		if err := s.SetExamSwitch(ctx, sw); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetExamSwitch(ctx, store.ExamSwitch{Disabled: true}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("switch without exam id: %v, want ErrInvalid", err)
	}
	if err := s.SetExamSwitch(ctx, store.ExamSwitch{ExamID: "m12", By: 99999}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("switch by an unknown user: %v, want ErrNotFound", err)
	}
	s.Close()
	s = open(t)
	defer s.Close()
	got, err := s.ExamSwitches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := got["m12"]; len(got) != 2 || m.Disabled || m.Note != "" || m.By != admin.ID || m.At.Before(before) {
		t.Errorf("m12 after disable then enable: %+v (all %v)", m, got)
	}
	if m := got["m34"]; !m.Disabled || m.Note != "考场维护，明天恢复" || m.By != admin.ID {
		t.Errorf("m34: %+v", m)
	}
}

func newUser(t *testing.T, s store.Store, email string) *store.User {
	t.Helper()
	u := &store.User{Email: email, Name: email, Role: store.RoleLearner, PasswordHash: "x"}
	if err := s.CreateUser(ctxT(t), u); err != nil {
		t.Fatal(err)
	}
	return u
}

func testCertificates(t *testing.T, open opener) {
	ctx := ctxT(t)
	s := open(t)
	defer s.Close()
	u := newUser(t, s, "a@example.com")
	r := &store.CertRecord{ID: "CL-AAAA-BBBB-CCCC-DDDD", UserID: u.ID, Document: []byte(`{"doc":1}` + "\n")}
	if err := s.PutCertificate(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCertificate(ctx, r); !errors.Is(err, store.ErrExists) {
		t.Errorf("second put: %v, want ErrExists", err)
	}
	got, err := s.Certificate(ctx, r.ID)
	if err != nil || string(got.Document) != string(r.Document) || got.Revoked || got.UserID != u.ID {
		t.Fatalf("Certificate = %+v, %v", got, err)
	}
	if _, err := s.Certificate(ctx, "CL-NONE"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if err := s.RevokeCertificate(ctx, r.ID, u.ID, "  "); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("revoke without reason: %v", err)
	}
	if err := s.RevokeCertificate(ctx, r.ID, u.ID, "answers shared"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeCertificate(ctx, r.ID, u.ID, "second reason"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Certificate(ctx, r.ID)
	if !got.Revoked || got.Reason != "answers shared" || got.RevokedBy != u.ID {
		t.Errorf("after revoke: %+v, want the first reason kept", got)
	}
	rev, err := s.Revoked(ctx)
	if err != nil || len(rev) != 1 || rev[0].ID != r.ID {
		t.Errorf("Revoked = %+v, %v", rev, err)
	}
	if err := s.RevokeCertificate(ctx, "CL-NONE", 0, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
}

func testAttempts(t *testing.T, open opener) {
	ctx := ctxT(t)
	s := open(t)
	u := newUser(t, s, "c@example.com")
	start := time.Now().UTC().Truncate(time.Microsecond)
	a := &store.Attempt{UserID: u.ID, ExamID: "m12", Seed: make([]byte, 32), StartedAt: start, Deadline: start.Add(90 * time.Minute)}
	if err := s.StartAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAttempt(ctx, &store.Attempt{UserID: u.ID, ExamID: "other", Seed: make([]byte, 32), StartedAt: start, Deadline: start.Add(time.Hour)}); !errors.Is(err, store.ErrExists) {
		t.Errorf("second active attempt: %v, want ErrExists", err)
	}
	if err := s.SaveAnswer(ctx, a.ID, 2, `{"class":"link-loss"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.LogCommand(ctx, a.ID, store.Command{Task: 2, Node: "node1", Command: "ping -c 200 10.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	// A restart keeps the answer, the commands and the deadline.
	s.Close()
	s = open(t)
	defer s.Close()
	act, err := s.ActiveAttempt(ctx, u.ID)
	if err != nil || act.ID != a.ID || !act.Deadline.Equal(a.Deadline) || len(act.Seed) != 32 {
		t.Fatalf("ActiveAttempt after reopen = %+v, %v", act, err)
	}
	tasks, err := s.Tasks(ctx, a.ID)
	if err != nil || len(tasks) != 1 || tasks[0].Task != 2 || tasks[0].Answer != `{"class":"link-loss"}` {
		t.Fatalf("Tasks = %+v, %v", tasks, err)
	}
	cmds, err := s.Commands(ctx, a.ID)
	if err != nil || len(cmds) != 1 || cmds[0].Node != "node1" {
		t.Fatalf("Commands = %+v, %v", cmds, err)
	}
	// A lab's start-up pauses the clock: the deadline moves by its length.
	if err := s.ExtendDeadline(ctx, a.ID, 42*time.Second+5*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtendDeadline(ctx, a.ID, -time.Second); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("negative extension: %v, want ErrInvalid", err)
	}
	if got, _ := s.Attempt(ctx, a.ID); !got.Deadline.Equal(a.Deadline.Add(42*time.Second + 5*time.Microsecond)) {
		t.Errorf("extended deadline %s, want %s + 42.000005s", got.Deadline, a.Deadline)
	}
	if err := s.GradeTask(ctx, a.ID, 2, 0.8, `{"evidence":["ping-loss"]}`); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitAttempt(ctx, a.ID, 0.8, true, true); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitAttempt(ctx, a.ID, 0.1, false, false); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("second submit: %v, want ErrInvalid", err)
	}
	if err := s.ExtendDeadline(ctx, a.ID, time.Second); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("extend after submit: %v, want ErrInvalid", err)
	}
	if err := s.SaveAnswer(ctx, a.ID, 2, "late"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("save after submit: %v, want ErrInvalid", err)
	}
	got, _ := s.Attempt(ctx, a.ID)
	if got.State != store.AttemptSubmitted || !got.Passed || !got.Auto || got.Score != 0.8 {
		t.Errorf("submitted attempt = %+v", got)
	}
	if err := s.VoidAttempt(ctx, a.ID, u.ID, "impersonation"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Attempt(ctx, a.ID)
	if got.State != store.AttemptVoided || got.Passed || got.VoidReason != "impersonation" {
		t.Errorf("voided attempt = %+v", got)
	}
	for _, q := range []struct {
		exam string
		user int64
		want int
	}{{"m12", 0, 1}, {"", u.ID, 1}, {"m12", u.ID, 1}, {"", 0, 1}, {"other", 0, 0}, {"", u.ID + 1, 0}} {
		if list, err := s.Attempts(ctx, q.exam, q.user); err != nil || len(list) != q.want {
			t.Errorf("Attempts(%q, %d) = %+v, %v; want %d", q.exam, q.user, list, err, q.want)
		}
	}
	// With the first attempt over, a new one may start.
	if err := s.StartAttempt(ctx, &store.Attempt{UserID: u.ID, ExamID: "m12", Seed: make([]byte, 32), StartedAt: start, Deadline: start.Add(time.Hour)}); err != nil {
		t.Errorf("new attempt after void: %v", err)
	}
}
