package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// busyTimeout is how long a connection waits for another process's write
// lock before failing with "database is locked".
const busyTimeout = 10 * time.Second

// SQLite is the Store on one SQLite file in WAL mode.
//
// It holds two pools on the same file. SQLite allows one writer at a time,
// so all writes go through a single connection: they queue in Go (bounded by
// ctx) instead of spinning on SQLITE_BUSY. Reads use their own pool and run
// beside the writer, which WAL permits. busy_timeout still covers other
// processes opening the same file (e.g. an admin command).
type SQLite struct {
	sqlDB
	path string
}

// sqliteDialect: the writer's transactions are IMMEDIATE (_txlock), so they
// hold the write lock from BEGIN and migrations need no lock of their own;
// a deferred transaction reads one snapshot from its first read on.
var sqliteDialect = dialect{
	name:       "sqlite",
	migrations: "migrations/sqlite",
	versionTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`,
}

// sqliteCode returns the extended result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

var _ Store = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) the database at path, with its
// parent directory (0700) and the file itself (0600), and applies pending
// migrations. A database migrated by a newer binary is refused with
// ErrSchemaTooNew.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return OpenSQLiteVia(ctx, "sqlite", path)
}

// OpenSQLiteVia is OpenSQLite through driverName: modernc's "sqlite" or a
// database/sql driver registered to wrap it (a test counting statements).
func OpenSQLiteVia(ctx context.Context, driverName, path string) (*SQLite, error) {
	if path == "" {
		return nil, fmt.Errorf("open sqlite: %w: empty path", ErrInvalid)
	}
	// The driver cuts a plain file name at '?', where its options begin.
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite %q: %w: path must not contain '?' or '#'", path, ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite %s: create directory: %w", abs, err)
	}
	// Create the file ourselves so it gets 0600; SQLite gives the -wal and
	// -shm files the same mode as the database.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}

	s := &SQLite{sqlDB: sqlDB{d: sqliteDialect}, path: abs}
	pragmas := "?_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")&_pragma=foreign_keys(1)"
	if s.w, err = sql.Open(driverName, abs+pragmas+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.checkWAL(ctx); err != nil {
		s.w.Close()
		return nil, err
	}
	sub, err := embeddedMigrations(s.d)
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	if err := migrate(ctx, s.w, s.d, sub); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}

	if s.r, err = sql.Open(driverName, abs+pragmas+"&_pragma=query_only(1)"); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	if err := s.r.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite %s: readers: %w", abs, err)
	}
	return s, nil
}

// checkWAL makes sure journal_mode=WAL took effect; it silently does not on
// filesystems without shared memory, and readers would then block writers.
func (s *SQLite) checkWAL(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("open sqlite %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("open sqlite %s: journal mode is %q, want wal (is the file on a network filesystem?)", s.path, mode)
	}
	return nil
}

// Path returns the database file's absolute path.
func (s *SQLite) Path() string { return s.path }

// Ping implements Store.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.ping(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", s.path, err)
	}
	return nil
}

// Close implements Store. It first lets SQLite refresh its query-planner
// statistics (PRAGMA optimize), as SQLite recommends before closing.
func (s *SQLite) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if _, err := s.w.ExecContext(ctx, "PRAGMA optimize"); err != nil {
		errs = append(errs, fmt.Errorf("optimize: %w", err))
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite %s: %w", s.path, err)
	}
	return nil
}
