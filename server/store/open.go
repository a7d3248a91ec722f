package store

import (
	"context"
	"strings"
)

// DB is all a database gives commlab: accounts and progress, exams and
// certificates. SQLite and Postgres both are one.
type DB interface {
	Store
	Exams
	Certs
}

var (
	_ DB = (*SQLite)(nil)
	_ DB = (*Postgres)(nil)
)

// Open opens the database spec names: a PostgreSQL URL (postgres:// or
// postgresql://) or else the path of an SQLite file.
func Open(ctx context.Context, spec string) (DB, error) {
	if IsPostgresURL(spec) {
		return OpenPostgres(ctx, spec)
	}
	return OpenSQLite(ctx, spec)
}

// IsPostgresURL reports whether spec names a PostgreSQL database rather than
// an SQLite file.
func IsPostgresURL(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}
