package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func openRaw(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func version(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMigrationFailureRollsBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	db := openRaw(t)
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE b (x INTEGER); INSERT INTO nowhere VALUES (1);")},
	}
	err := migrate(ctx, db, sqliteDialect, fsys)
	if err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("migrate error = %v, want one naming 0002_b.sql", err)
	}
	if v := version(t, db); v != 1 {
		t.Errorf("version after failed 0002 = %d, want 1", v)
	}
	// The first statement of the failed migration was rolled back too.
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'b'").Scan(&n); err != nil || n != 0 {
		t.Errorf("table b exists after failed migration (count %d, err %v)", n, err)
	}
	fsys["0002_b.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE b (x INTEGER);")}
	if err := migrate(ctx, db, sqliteDialect, fsys); err != nil {
		t.Fatalf("migrate after fix: %v", err)
	}
	if v := version(t, db); v != 2 {
		t.Errorf("version after fix = %d, want 2", v)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"empty", fstest.MapFS{}, "no migrations"},
		{"bad name", fstest.MapFS{"1_init.sql": {}}, "0001_what_it_does.sql"},
		{"zero", fstest.MapFS{"0000_init.sql": {}}, "start at 0001"},
		{"duplicate", fstest.MapFS{"0001_a.sql": {}, "0001_b.sql": {}}, "already used"},
	}
	for _, tc := range tests {
		_, err := loadMigrations(tc.fsys)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"0002_b.sql": {}, "0001_a.sql": {}, "README.md": {}})
	if err != nil || len(ms) != 2 || ms[0].version != 1 || ms[1].version != 2 {
		t.Errorf("loadMigrations = %+v, %v; want versions 1, 2", ms, err)
	}
}

func TestEmbeddedMigrationsHaveNoGaps(t *testing.T) {
	sub, err := embeddedMigrations(sqliteDialect)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(sub)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.version != i+1 {
			t.Errorf("migration %s has version %d, want %d (no gaps)", m.name, m.version, i+1)
		}
	}
}
