package store

import (
	"context"
	"fmt"
	"strings"
)

// DB is all a database gives commlab: accounts and progress, exams and
// certificates, workshops, the replica of each lab. SQLite and Postgres both
// are one.
type DB interface {
	Store
	Exams
	Certs
	Workshops
	LabOwners
}

var (
	_ DB = (*SQLite)(nil)
	_ DB = (*Postgres)(nil)
)

// Open opens the database spec names: a PostgreSQL URL (postgres:// or
// postgresql://) or else the path of an SQLite file. Any other URL is
// refused rather than taken for a file name.
func Open(ctx context.Context, spec string) (DB, error) {
	switch {
	case IsPostgresURL(spec):
		return OpenPostgres(ctx, spec)
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("open store %q: %w: want a postgres:// URL or the path of an SQLite file", spec, ErrInvalid)
	}
	return OpenSQLite(ctx, spec)
}

// IsPostgresURL reports whether spec names a PostgreSQL database rather than
// an SQLite file.
func IsPostgresURL(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}
