package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/server/store/storetest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, path string) *store.SQLite {
	t.Helper()
	s, err := store.OpenSQLite(ctxT(t), path)
	if err != nil {
		t.Fatalf("OpenSQLite(%s): %v", path, err)
	}
	return s
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openT(t, filepath.Join(t.TempDir(), "commlab.db"))
	})
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	path := filepath.Join(dir, "commlab.db")
	s := openT(t, path)
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %s, want %s", s.Path(), path)
	}
	for _, tc := range []struct {
		path string
		want os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {path, 0o600}} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.want {
			t.Errorf("mode of %s = %v, want %v", tc.path, fi.Mode(), tc.want)
		}
	}
	// WAL really is on: the -wal file exists once something was written.
	if err := s.CreateUser(ctxT(t), &store.User{Email: "a@b.c", Name: "a", Role: store.RoleLearner}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no WAL file: %v", err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("WAL file mode %v is readable by others", fi.Mode())
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"", filepath.Join(dir, "a?b.db"), filepath.Join(dir, "x#y.db")} {
		if s, err := store.OpenSQLite(ctxT(t), p); !errors.Is(err, store.ErrInvalid) {
			if err == nil {
				s.Close()
			}
			t.Errorf("OpenSQLite(%q) error = %v, want ErrInvalid", p, err)
		}
	}
	// A directory where the file should be.
	if s, err := store.OpenSQLite(ctxT(t), dir); err == nil || !strings.Contains(err.Error(), dir) {
		if err == nil {
			s.Close()
		}
		t.Errorf("OpenSQLite(directory) error = %v, want one naming %s", err, dir)
	}
}

// schemaVersions reads schema_migrations with a plain connection.
func schemaVersions(t *testing.T, path string) []int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctxT(t), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestReopenKeepsDataAndMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commlab.db")
	s := openT(t, path)
	u := &store.User{Email: "keep@example.org", Name: "Keep", Role: store.RoleAdmin, PasswordHash: "h"}
	if err := s.CreateUser(ctxT(t), u); err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateSession(ctxT(t), u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	first := schemaVersions(t, path)
	if len(first) == 0 || first[0] != 1 {
		t.Fatalf("schema versions after first open = %v, want starting at 1", first)
	}
	for i := range 3 {
		s = openT(t, path)
		got, err := s.SessionUser(ctxT(t), tok)
		if err != nil || got.Email != u.Email || got.Role != store.RoleAdmin {
			t.Errorf("reopen %d: SessionUser = %v, %v; want %s", i, got, err, u.Email)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if again := schemaVersions(t, path); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Errorf("reopen %d: schema versions %v, want %v", i, again, first)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commlab.db")
	if err := openT(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctxT(t), "INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := store.OpenSQLite(ctxT(t), path)
	if err == nil {
		s.Close()
		t.Fatal("OpenSQLite on a newer schema succeeded, want ErrSchemaTooNew")
	}
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "9999") {
		t.Errorf("error = %v, want ErrSchemaTooNew naming version 9999", err)
	}
}

// TestTwoProcessesShareFile opens the file twice, as the server and an admin
// command would, and writes from both at once: busy_timeout must absorb the
// contention that the in-process writer queue cannot.
func TestTwoProcessesShareFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commlab.db")
	a, b := openT(t, path), openT(t, path)
	defer a.Close()
	defer b.Close()
	u := &store.User{Email: "two@example.org", Name: "Two", Role: store.RoleLearner}
	if err := a.CreateUser(ctxT(t), u); err != nil {
		t.Fatal(err)
	}
	const perStore, rounds = 10, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*perStore*rounds)
	for _, s := range []*store.SQLite{a, b} {
		for range perStore {
			wg.Go(func() {
				for range rounds {
					if err := s.RecordLab(ctxT(t), u.ID, "shared", "shared-lab", 0.5, false); err != nil {
						errs <- err
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p, err := b.Progress(ctxT(t), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := p["shared"].LabAttempts; got != 2*perStore*rounds {
		t.Errorf("attempts = %d, want %d", got, 2*perStore*rounds)
	}
}

func TestContextCancelled(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "commlab.db"))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.MarkRead(ctx, 1, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("MarkRead with cancelled ctx: error = %v, want context.Canceled", err)
	}
	if _, err := s.UserByID(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("UserByID with cancelled ctx: error = %v, want context.Canceled", err)
	}
}

func benchStore(b *testing.B) (*store.SQLite, *store.User) {
	s, err := store.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	u := &store.User{Email: "bench@example.org", Name: "B", Role: store.RoleLearner}
	if err := s.CreateUser(context.Background(), u); err != nil {
		b.Fatal(err)
	}
	return s, u
}

func BenchmarkRecordLabParallel(b *testing.B) {
	s, u := benchStore(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.RecordLab(context.Background(), u.ID, "bench", "bench-lab", 0.5, false); err != nil {
				b.Error(err)
			}
		}
	})
}

func BenchmarkSessionUserParallel(b *testing.B) {
	s, u := benchStore(b)
	tok, err := s.CreateSession(context.Background(), u.ID, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.SessionUser(context.Background(), tok); err != nil {
				b.Error(err)
			}
		}
	})
}
