package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/commlab/commlab/internal/pgtest"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/server/store/storetest"
)

func openPG(t *testing.T, url string) *store.Postgres {
	t.Helper()
	s, err := store.OpenPostgres(ctxT(t), url)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	return s
}

// TestPostgres runs everything the SQLite tests check that is not about the
// file, against a throwaway PostgreSQL server (one for all subtests, a new
// database for each store).
func TestPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	pgOpener := func(t *testing.T) opener {
		url := pg.URL(pg.NewDB(t))
		return func(t *testing.T) store.DB { return openPG(t, url) }
	}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return openPG(t, pg.URL(pg.NewDB(t))) })
	})
	t.Run("Certificates", func(t *testing.T) { testCertificates(t, pgOpener(t)) })
	t.Run("Attempts", func(t *testing.T) { testAttempts(t, pgOpener(t)) })
	t.Run("ExamSwitches", func(t *testing.T) { testExamSwitches(t, pgOpener(t)) })
	t.Run("Workshops", func(t *testing.T) { testWorkshops(t, pgOpener(t)) })
	t.Run("LabOwners", func(t *testing.T) { testLabOwners(t, pgOpener(t)) })

	t.Run("ReplicasMigrateTogether", func(t *testing.T) {
		// Replicas started at once all migrate the same empty database; the
		// advisory lock lets one apply each migration and the others see it.
		url := pg.URL(pg.NewDB(t))
		const n = 4
		stores := make([]*store.Postgres, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = store.OpenPostgres(ctxT(t), url) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				continue
			}
			defer stores[i].Close()
		}
		if t.Failed() {
			return
		}
		// What one replica writes, another reads.
		u := newUser(t, stores[0], "shared@example.org")
		if got, err := stores[n-1].UserByEmail(ctxT(t), "SHARED@example.org"); err != nil || got.ID != u.ID {
			t.Errorf("other replica: UserByEmail = %+v, %v; want ID %d", got, err, u.ID)
		}
	})

	t.Run("NewerSchemaRefused", func(t *testing.T) {
		db := pg.NewDB(t)
		if err := openPG(t, pg.URL(db)).Close(); err != nil {
			t.Fatal(err)
		}
		pg.Exec(t, db, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)")
		s, err := store.OpenPostgres(ctxT(t), pg.URL(db))
		if err == nil {
			s.Close()
			t.Fatal("OpenPostgres on a newer schema succeeded, want ErrSchemaTooNew")
		}
		if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "9999") {
			t.Errorf("error = %v, want ErrSchemaTooNew naming version 9999", err)
		}
	})
}

func TestOpenPostgresErrors(t *testing.T) {
	tests := []struct {
		name, url string
		want      error
		wantText  string
	}{
		{"bad URL", "postgres://u:secret@[::1/db", store.ErrInvalid, "open postgres"},
		// Nothing listens on this socket directory: the error names the
		// database and keeps the password out.
		{"no server", "postgres://u:secret@/db?host=/nonexistent-commlab&connect_timeout=2", nil, "db on /nonexistent-commlab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.OpenPostgres(ctxT(t), tc.url)
			if err == nil {
				s.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantText) || strings.Contains(err.Error(), "secret") {
				t.Errorf("error = %q, want one containing %q and not the password", err, tc.wantText)
			}
		})
	}
}

func TestOpenPicksTheStore(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		spec    string
		want    string // the type opened, or "" for an error
		wantErr error
	}{
		{filepath.Join(dir, "commlab.db"), "*store.SQLite", nil},
		{"mysql://u@db/commlab", "", store.ErrInvalid},   // not taken for a file name
		{"postgresql://u@[::1/db", "", store.ErrInvalid}, // a PostgreSQL URL, so pgx's parse error
	}
	for _, tc := range tests {
		s, err := store.Open(ctxT(t), tc.spec)
		if tc.want == "" {
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, tc.wantErr) || strings.Contains(err.Error(), "sqlite") {
				t.Errorf("Open(%q) error = %v, want %v and no SQLite file", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.spec, err)
			continue
		}
		if got := fmt.Sprintf("%T", s); got != tc.want {
			t.Errorf("Open(%q) opened %s, want %s", tc.spec, got, tc.want)
		}
		s.Close()
	}
}
