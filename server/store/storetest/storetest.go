// Package storetest is the conformance suite for store.Store: every
// implementation runs Run against a real database, so callers can rely on
// the same behaviour from SQLite and PostgreSQL.
package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/server/store"
)

// Run runs the suite. open must return a new, empty store for each call;
// Run closes it when the subtest ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	fresh := func(t *testing.T) store.Store {
		t.Helper()
		s := open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Users", testUsers},
		{"UserValidation", testUserValidation},
		{"UniqueEmailIgnoresCase", testUniqueEmail},
		{"ConcurrentSignup", testConcurrentSignup},
		{"Roles", testRoles},
		{"PasswordHash", testPasswordHash},
		{"Sessions", testSessions},
		{"SessionExpiry", testSessionExpiry},
		{"UserSessions", testUserSessions},
		{"ReadAndQuiz", testReadAndQuiz},
		{"LabAttempts", testLabAttempts},
		{"LabsOfOneChapter", testLabsOfOneChapter},
		{"ProgressValidation", testProgressValidation},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Ping", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, fresh(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustUser(t *testing.T, s store.Store, email string, role store.Role) *store.User {
	t.Helper()
	u := &store.User{Email: email, Name: "Name of " + email, Role: role, PasswordHash: "$argon2id$fake"}
	if err := s.CreateUser(ctxT(t), u); err != nil {
		t.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u
}

func sameUser(t *testing.T, what string, got, want *store.User) {
	t.Helper()
	if got.ID != want.ID || got.Email != want.Email || got.Name != want.Name || got.Role != want.Role ||
		got.PasswordHash != want.PasswordHash || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s = %+v, want %+v", what, *got, *want)
	}
}

func testUsers(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("CountUsers on empty store = %d, %v; want 0, nil", n, err)
	}
	before := time.Now().Add(-time.Second)
	a := mustUser(t, s, "Ada@Example.org", store.RoleAdmin)
	b := mustUser(t, s, "bob@example.org", store.RoleLearner)
	if a.ID == 0 || b.ID == 0 || a.ID == b.ID {
		t.Errorf("IDs = %d, %d; want distinct and non-zero", a.ID, b.ID)
	}
	if a.CreatedAt.Before(before) || a.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt = %v, want about now", a.CreatedAt)
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 2 {
		t.Errorf("CountUsers = %d, %v; want 2, nil", n, err)
	}
	for _, email := range []string{"Ada@Example.org", "ada@example.org", "ADA@EXAMPLE.ORG", " ada@example.org "} {
		got, err := s.UserByEmail(ctx, email)
		if err != nil {
			t.Errorf("UserByEmail(%q): %v", email, err)
			continue
		}
		sameUser(t, fmt.Sprintf("UserByEmail(%q)", email), got, a)
	}
	got, err := s.UserByID(ctx, b.ID)
	if err != nil {
		t.Fatalf("UserByID(%d): %v", b.ID, err)
	}
	sameUser(t, "UserByID", got, b)
	if _, err := s.UserByEmail(ctx, "nobody@example.org"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UserByEmail(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.UserByID(ctx, a.ID+b.ID+100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UserByID(unknown) error = %v, want ErrNotFound", err)
	}
	all, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatalf("ListUsers: %v", err)
	}
	if len(all) != 2 {
		t.Fatalf("ListUsers returned %d users, want 2", len(all))
	}
	sameUser(t, "ListUsers[0]", &all[0], a)
	sameUser(t, "ListUsers[1]", &all[1], b)
}

func testUserValidation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tests := []struct {
		name string
		u    *store.User
	}{
		{"nil", nil},
		{"empty email", &store.User{Email: "  ", Name: "x", Role: store.RoleLearner}},
		{"empty role", &store.User{Email: "x@example.org", Name: "x"}},
		{"unknown role", &store.User{Email: "x@example.org", Name: "x", Role: "root"}},
	}
	for _, tc := range tests {
		if err := s.CreateUser(ctx, tc.u); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateUser(%s) error = %v, want ErrInvalid", tc.name, err)
		}
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Errorf("CountUsers after rejected inserts = %d, %v; want 0", n, err)
	}
}

func testUniqueEmail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mustUser(t, s, "eve@example.org", store.RoleLearner)
	for _, email := range []string{"eve@example.org", "EVE@example.org", "Eve@Example.Org"} {
		err := s.CreateUser(ctx, &store.User{Email: email, Name: "again", Role: store.RoleLearner})
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("CreateUser(%q) after eve@example.org: error = %v, want ErrExists", email, err)
		}
	}
	// Non-ASCII letters fold too, which SQL's ASCII-only NOCASE would miss.
	mustUser(t, s, "émile@example.org", store.RoleLearner)
	if err := s.CreateUser(ctx, &store.User{Email: "ÉMILE@example.org", Name: "x", Role: store.RoleLearner}); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateUser(ÉMILE@...) after émile@...: error = %v, want ErrExists", err)
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 2 {
		t.Errorf("CountUsers = %d, %v; want 2", n, err)
	}
}

func testConcurrentSignup(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateUser(ctx, &store.User{Email: fmt.Sprintf("Race@Example.org%s", strings.Repeat(" ", i%2)), Name: "r", Role: store.RoleLearner})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrExists):
			t.Errorf("signup %d: %v, want nil or ErrExists", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent signups with one email succeeded, want 1", ok, n)
	}
}

func testRoles(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "ins@example.org", store.RoleLearner)
	if err := s.SetRole(ctx, u.ID, store.RoleInstructor); err != nil {
		t.Fatalf("SetRole: %v", err)
	}
	got, err := s.UserByID(ctx, u.ID)
	if err != nil || got.Role != store.RoleInstructor {
		t.Errorf("role after SetRole = %v, %v; want instructor", got, err)
	}
	if err := s.SetRole(ctx, u.ID, "superuser"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SetRole(superuser) error = %v, want ErrInvalid", err)
	}
	if err := s.SetRole(ctx, u.ID+1000, store.RoleAdmin); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetRole(unknown user) error = %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		r    store.Role
		want bool
	}{{store.RoleLearner, true}, {store.RoleInstructor, true}, {store.RoleAdmin, true}, {"", false}, {"Admin", false}} {
		if got := tc.r.Valid(); got != tc.want {
			t.Errorf("Role(%q).Valid() = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func testPasswordHash(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "pw@example.org", store.RoleLearner)
	if err := s.SetPasswordHash(ctx, u.ID, "$argon2id$new"); err != nil {
		t.Fatalf("SetPasswordHash: %v", err)
	}
	got, err := s.UserByEmail(ctx, u.Email)
	if err != nil || got.PasswordHash != "$argon2id$new" {
		t.Errorf("after SetPasswordHash: %v, %v; want hash $argon2id$new", got, err)
	}
	if err := s.SetPasswordHash(ctx, u.ID+1000, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPasswordHash(unknown user) error = %v, want ErrNotFound", err)
	}
}

func testSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "sess@example.org", store.RoleLearner)
	tok, err := s.CreateSession(ctx, u.ID, time.Hour)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 {
		t.Errorf("token %q: decoded %d bytes, err %v; want 32 bytes of base64url", tok, len(raw), err)
	}
	tok2, err := s.CreateSession(ctx, u.ID, time.Hour)
	if err != nil || tok2 == tok {
		t.Errorf("second CreateSession = %q, %v; want a different token", tok2, err)
	}
	got, err := s.SessionUser(ctx, tok)
	if err != nil {
		t.Fatalf("SessionUser: %v", err)
	}
	sameUser(t, "SessionUser", got, u)
	for _, bad := range []string{"", "nope", tok[:len(tok)-1], strings.ToUpper(tok)} {
		if bad == tok {
			continue
		}
		if _, err := s.SessionUser(ctx, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionUser(%q) error = %v, want ErrNotFound", bad, err)
		}
	}
	if err := s.DeleteSession(ctx, tok); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if _, err := s.SessionUser(ctx, tok); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionUser after DeleteSession: error = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSession(ctx, tok); err != nil {
		t.Errorf("second DeleteSession = %v, want nil (logout is idempotent)", err)
	}
	if _, err := s.SessionUser(ctx, tok2); err != nil {
		t.Errorf("other session after DeleteSession: %v, want still valid", err)
	}
	if _, err := s.CreateSession(ctx, u.ID+1000, time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateSession(unknown user) error = %v, want ErrNotFound", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := s.CreateSession(ctx, u.ID, ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateSession(ttl %v) error = %v, want ErrInvalid", ttl, err)
		}
	}
}

func testSessionExpiry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "exp@example.org", store.RoleLearner)
	const short = 50 * time.Millisecond
	expiring, err := s.CreateSession(ctx, u.ID, short)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	lasting, err := s.CreateSession(ctx, u.ID, time.Hour)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if _, err := s.SessionUser(ctx, expiring); err != nil {
		t.Fatalf("SessionUser before expiry: %v", err)
	}
	time.Sleep(short + 20*time.Millisecond)
	if _, err := s.SessionUser(ctx, expiring); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionUser after expiry: error = %v, want ErrNotFound", err)
	}
	n, err := s.DeleteExpiredSessions(ctx)
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v; want 1, nil", n, err)
	}
	if n, err := s.DeleteExpiredSessions(ctx); err != nil || n != 0 {
		t.Errorf("second DeleteExpiredSessions = %d, %v; want 0, nil", n, err)
	}
	if _, err := s.SessionUser(ctx, lasting); err != nil {
		t.Errorf("unexpired session after DeleteExpiredSessions: %v", err)
	}
}

func testUserSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a := mustUser(t, s, "a@example.org", store.RoleLearner)
	b := mustUser(t, s, "b@example.org", store.RoleLearner)
	var aToks []string
	for range 3 {
		tok, err := s.CreateSession(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		aToks = append(aToks, tok)
	}
	bTok, err := s.CreateSession(ctx, b.ID, time.Hour)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if n, err := s.DeleteUserSessions(ctx, a.ID); err != nil || n != 3 {
		t.Errorf("DeleteUserSessions = %d, %v; want 3, nil", n, err)
	}
	for _, tok := range aToks {
		if _, err := s.SessionUser(ctx, tok); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionUser after DeleteUserSessions: error = %v, want ErrNotFound", err)
		}
	}
	if got, err := s.SessionUser(ctx, bTok); err != nil || got.ID != b.ID {
		t.Errorf("other user's session: %v, %v; want user %d", got, err, b.ID)
	}
}

func progressOf(t *testing.T, s store.Store, userID int64, chapter string) store.Progress {
	t.Helper()
	all, err := s.Progress(ctxT(t), userID)
	if err != nil {
		t.Fatalf("Progress: %v", err)
	}
	return all[chapter]
}

func testReadAndQuiz(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "q@example.org", store.RoleLearner)
	other := mustUser(t, s, "o@example.org", store.RoleLearner)
	got, err := s.Progress(ctx, u.ID)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Progress of new user = %v, %v; want empty non-nil map", got, err)
	}
	if err := s.MarkRead(ctx, u.ID, "m1c1"); err != nil {
		t.Fatalf("MarkRead: %v", err)
	}
	if err := s.MarkRead(ctx, u.ID, "m1c1"); err != nil {
		t.Fatalf("MarkRead again: %v", err)
	}
	if p := progressOf(t, s, u.ID, "m1c1"); !p.Read || p.ChapterID != "m1c1" || p.QuizPassed || p.LabAttempts != 0 || p.UpdatedAt.IsZero() {
		t.Errorf("after MarkRead: %+v", p)
	}
	steps := []struct {
		score      float64
		passed     bool
		wantScore  float64
		wantPassed bool
	}{
		{0.5, false, 0.5, false},
		{0.9, true, 0.9, true},
		{0.3, false, 0.9, true}, // a worse retry lowers nothing
		{0.95, false, 0.95, true},
		{1, true, 1, true},
	}
	for i, st := range steps {
		given := store.Answers{"q1": {fmt.Sprint(i)}, "q2": {"0", "2"}}
		if err := s.RecordQuiz(ctx, u.ID, "m1c1", st.score, st.passed, given); err != nil {
			t.Fatalf("step %d RecordQuiz: %v", i, err)
		}
		p := progressOf(t, s, u.ID, "m1c1")
		if p.QuizScore != st.wantScore || p.QuizPassed != st.wantPassed || !p.Read {
			t.Errorf("step %d RecordQuiz(%v, %v): got score %v passed %v read %v; want %v %v true",
				i, st.score, st.passed, p.QuizScore, p.QuizPassed, p.Read, st.wantScore, st.wantPassed)
		}
		// The latest answers are kept, whatever their score.
		if !reflect.DeepEqual(p.QuizAnswers, given) {
			t.Errorf("step %d: answers %v, want the latest %v", i, p.QuizAnswers, given)
		}
	}
	// A quiz before reading creates the row without marking it read.
	if err := s.RecordQuiz(ctx, u.ID, "m1c2", 0.2, false, nil); err != nil {
		t.Fatalf("RecordQuiz: %v", err)
	}
	if p := progressOf(t, s, u.ID, "m1c2"); p.Read || p.QuizScore != 0.2 || len(p.QuizAnswers) != 0 {
		t.Errorf("quiz without read: %+v", p)
	}
	if all, err := s.Progress(ctx, other.ID); err != nil || len(all) != 0 {
		t.Errorf("other user's Progress = %v, %v; want empty", all, err)
	}
}

func testLabAttempts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "lab@example.org", store.RoleLearner)
	steps := []struct {
		score      float64
		passed     bool
		wantScore  float64
		wantPassed bool
	}{
		{0.4, false, 0.4, false},
		{0.8, true, 0.8, true},
		{0.1, false, 0.8, true},
		{0.7, false, 0.8, true},
	}
	for i, st := range steps {
		if err := s.RecordLab(ctx, u.ID, "m2c3", "m2c3-lab", st.score, st.passed); err != nil {
			t.Fatalf("step %d RecordLab: %v", i, err)
		}
		p := progressOf(t, s, u.ID, "m2c3")
		if p.LabScore != st.wantScore || p.LabPassed != st.wantPassed || p.LabAttempts != i+1 {
			t.Errorf("step %d RecordLab(%v, %v): got score %v passed %v attempts %d; want %v %v %d",
				i, st.score, st.passed, p.LabScore, p.LabPassed, p.LabAttempts, st.wantScore, st.wantPassed, i+1)
		}
		if p.QuizScore != 0 || p.QuizPassed || p.Read {
			t.Errorf("step %d: lab touched quiz/read fields: %+v", i, p)
		}
		if l := p.Labs["m2c3-lab"]; l.Score != st.wantScore || l.Passed != st.wantPassed || l.Attempts != i+1 || len(p.Labs) != 1 {
			t.Errorf("step %d: per-lab record %+v (of %d labs); want score %v passed %v attempts %d", i, l, len(p.Labs), st.wantScore, st.wantPassed, i+1)
		}
	}
}

// testLabsOfOneChapter: a chapter with several labs (ch08 has four) keeps each
// lab's result apart, so passing one leaves the others not passed.
func testLabsOfOneChapter(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "labs@example.org", store.RoleLearner)
	other := mustUser(t, s, "labs2@example.org", store.RoleLearner)
	records := []struct {
		lab    string
		score  float64
		passed bool
	}{
		{"a", 0.3, false},
		{"b", 0.9, true},
		{"a", 0.5, false},
	}
	for _, r := range records {
		if err := s.RecordLab(ctx, u.ID, "m3c1", r.lab, r.score, r.passed); err != nil {
			t.Fatalf("RecordLab(%s): %v", r.lab, err)
		}
	}
	p := progressOf(t, s, u.ID, "m3c1")
	want := map[string]store.LabProgress{"a": {Score: 0.5, Attempts: 2}, "b": {Passed: true, Score: 0.9, Attempts: 1}}
	if !reflect.DeepEqual(p.Labs, want) {
		t.Errorf("labs %+v, want %+v", p.Labs, want)
	}
	if p.LabAttempts != 3 || !p.LabPassed || p.LabScore != 0.9 {
		t.Errorf("chapter summary: attempts %d passed %v best %v; want 3, true, 0.9", p.LabAttempts, p.LabPassed, p.LabScore)
	}
	if all, err := s.Progress(ctx, other.ID); err != nil || len(all) != 0 {
		t.Errorf("other user's Progress = %v, %v; want empty", all, err)
	}
}

func testProgressValidation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := mustUser(t, s, "v@example.org", store.RoleLearner)
	for _, score := range []float64{-0.01, 1.01, 100, math.NaN(), math.Inf(1)} {
		if err := s.RecordQuiz(ctx, u.ID, "c", score, true, nil); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordQuiz(score %v) error = %v, want ErrInvalid", score, err)
		}
		if err := s.RecordLab(ctx, u.ID, "c", "l", score, true); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordLab(score %v) error = %v, want ErrInvalid", score, err)
		}
	}
	for _, ch := range []string{"", strings.Repeat("x", 129)} {
		if err := s.MarkRead(ctx, u.ID, ch); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("MarkRead(chapter of %d bytes) error = %v, want ErrInvalid", len(ch), err)
		}
	}
	missing := u.ID + 1000
	checks := map[string]error{
		"MarkRead":   s.MarkRead(ctx, missing, "c"),
		"RecordQuiz": s.RecordQuiz(ctx, missing, "c", 0.5, false, nil),
		"RecordLab":  s.RecordLab(ctx, missing, "c", "l", 0.5, false),
	}
	for name, err := range checks {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s(unknown user) error = %v, want ErrNotFound", name, err)
		}
	}
	if all, err := s.Progress(ctx, u.ID); err != nil || len(all) != 0 {
		t.Errorf("Progress after rejected writes = %v, %v; want empty", all, err)
	}
}

// testConcurrentWriters has 20 goroutines record progress at once, on one
// shared chapter and on their own, while others read: nothing may fail (no
// "database is locked") and no update may be lost.
func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const workers, rounds = 20, 10
	u := mustUser(t, s, "busy@example.org", store.RoleLearner)
	errs := make(chan error, workers*rounds*4)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := fmt.Sprintf("c%02d", w)
			for r := range rounds {
				score := float64(w*rounds+r) / float64(workers*rounds)
				if err := s.RecordLab(ctx, u.ID, "shared", "shared-lab", score, false); err != nil {
					errs <- fmt.Errorf("worker %d RecordLab: %w", w, err)
				}
				if err := s.RecordQuiz(ctx, u.ID, own, score, r == rounds-1, nil); err != nil {
					errs <- fmt.Errorf("worker %d RecordQuiz: %w", w, err)
				}
				if err := s.MarkRead(ctx, u.ID, own); err != nil {
					errs <- fmt.Errorf("worker %d MarkRead: %w", w, err)
				}
				if _, err := s.Progress(ctx, u.ID); err != nil {
					errs <- fmt.Errorf("worker %d Progress: %w", w, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := s.Progress(ctx, u.ID)
	if err != nil {
		t.Fatalf("Progress: %v", err)
	}
	if len(all) != workers+1 {
		t.Errorf("Progress has %d chapters, want %d", len(all), workers+1)
	}
	sh := all["shared"]
	wantBest := float64(workers*rounds-1) / float64(workers*rounds)
	if sh.LabAttempts != workers*rounds || sh.LabScore != wantBest {
		t.Errorf("shared chapter: attempts %d best %v; want %d and %v", sh.LabAttempts, sh.LabScore, workers*rounds, wantBest)
	}
	for w := range workers {
		p := all[fmt.Sprintf("c%02d", w)]
		want := float64(w*rounds+rounds-1) / float64(workers*rounds)
		if !p.Read || !p.QuizPassed || p.QuizScore != want {
			t.Errorf("worker %d chapter: %+v; want read, passed, score %v", w, p, want)
		}
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(ctxT(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
}
