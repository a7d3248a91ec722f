package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Postgres is the Store on a PostgreSQL server, for more learners than one
// SQLite writer serves and for several commlab processes sharing one state.
// Reads and writes share one pgx pool; PostgreSQL runs them side by side.
type Postgres struct {
	sqlDB
	pool *pgxpool.Pool
	name string // the database, for messages: never the password
}

var _ Store = (*Postgres)(nil)

// migrationLockKey is the advisory lock migrations hold: any constant that no
// other application sharing the database uses ("commlab" in ASCII).
const migrationLockKey = 0x636f6d6d6c6162

// PostgreSQL error codes (Appendix A of its manual).
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// postgresDialect: an advisory transaction lock serialises migrations of
// replicas starting together; REPEATABLE READ gives a transaction one snapshot
// (READ COMMITTED, the default, takes one per statement).
var postgresDialect = dialect{
	name:       "postgres",
	migrations: "migrations/postgres",
	versionTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`,
	lockMigrations: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLockKey),
	snapshot:       &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
}

// OpenPostgres connects to the database that url names (libpq's URL or
// key=value form, e.g. postgres://commlab@db.example/commlab?sslmode=verify-full)
// and applies pending migrations. The database must exist; the user needs
// to create tables in it. A database migrated by a newer binary is refused with
// ErrSchemaTooNew.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message quotes the URL with its password masked.
		return nil, fmt.Errorf("open postgres: %w: %w", ErrInvalid, err)
	}
	name := cfg.ConnConfig.Database + " on " + cfg.ConnConfig.Host
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", name, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p := &Postgres{sqlDB: sqlDB{w: db, r: db, d: postgresDialect}, pool: pool, name: name}
	if err := db.PingContext(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("open postgres %s: %w", name, err)
	}
	sub, err := embeddedMigrations(p.d)
	if err == nil {
		err = migrate(ctx, db, p.d, sub)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("open postgres %s: %w", name, err)
	}
	return p, nil
}

// Pool is the underlying pgx pool, for what database/sql cannot do (LISTEN).
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Ping implements Store.
func (p *Postgres) Ping(ctx context.Context) error {
	if err := p.ping(ctx); err != nil {
		return fmt.Errorf("ping postgres %s: %w", p.name, err)
	}
	return nil
}

// Close implements Store.
func (p *Postgres) Close() error {
	err := p.w.Close()
	p.pool.Close()
	if err != nil {
		return fmt.Errorf("close postgres %s: %w", p.name, err)
	}
	return nil
}
