package store

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/commlab/commlab/internal/pgtest"
)

// lastRelease is the schema version of the last released commlab: databases
// made by it must open in this build with everything they hold.
const lastRelease = 3

// oldRow is a row a database at version `since` or later may hold, written in
// SQL both dialects accept.
type oldRow struct {
	since int
	sql   string
	args  []any
}

const (
	oldUserID = 7
	oldToken  = "token-of-an-older-release"
	oldTime   = 1700000000000000 // 2023-11-14T22:13:20Z in µs
	farFuture = 4102444800000000 // 2100-01-01
)

var oldRows = []oldRow{
	{1, "INSERT INTO users (id, email, email_key, name, role, password_hash, created_at) VALUES ($1, 'Old@Example.org', 'old@example.org', 'Old', 'instructor', 'h', $2)",
		[]any{oldUserID, oldTime}},
	{1, "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
		[]any{hashToken(oldToken), oldUserID, oldTime, farFuture}},
	{1, "INSERT INTO progress (user_id, chapter_id, is_read, quiz_passed, quiz_score, lab_passed, lab_score, lab_attempts, updated_at) VALUES ($1, 'ch01', TRUE, TRUE, 0.75, TRUE, 0.5, 2, $2)",
		[]any{oldUserID, oldTime}},
	{2, `UPDATE progress SET quiz_answers = '{"q1":["a"]}' WHERE user_id = $1`, []any{oldUserID}},
	{2, "INSERT INTO lab_progress (user_id, lab_id, chapter_id, passed, score, attempts, updated_at) VALUES ($1, 'ch01-lab', 'ch01', TRUE, 0.5, 2, $2)",
		[]any{oldUserID, oldTime}},
	{3, "INSERT INTO exam_attempts (user_id, exam_id, seed, state, started_at, deadline_at, submitted_at, score, passed) VALUES ($1, 'm12', $2, 'submitted', $3, $4, $4, 0.9, TRUE)",
		[]any{oldUserID, []byte("0123456789abcdef"), oldTime, oldTime + 3600e6}},
	{3, "INSERT INTO certificates (id, user_id, document, issued_at) VALUES ('CL-OLD', $1, $2, $3)",
		[]any{oldUserID, []byte(`{"old":true}`), oldTime}},
	// Two labs of one learner taken for running, as the start race of 0006 could leave.
	{6, "INSERT INTO lab_owners (lab_id, learner_id, replica, started_at) VALUES ('old-lab', $1, 'http://127.0.0.1:8081', $2)",
		[]any{oldUserID, oldTime}},
	{6, "INSERT INTO lab_owners (lab_id, learner_id, replica, started_at) VALUES ('old-lab-raced', $1, 'http://127.0.0.1:8082', $2)",
		[]any{oldUserID, oldTime + 1}},
}

// migrationsUpTo is d's embedded migrations with versions up to v.
func migrationsUpTo(t *testing.T, d dialect, v int) fs.FS {
	t.Helper()
	sub, err := embeddedMigrations(d)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(sub)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, m := range ms {
		if m.version <= v {
			out[m.name] = &fstest.MapFile{Data: []byte(m.sql)}
		}
	}
	return out
}

// TestUpgradeFromOlderSchemas makes a database at each older version (the last
// release's and those since among them), fills it as that version could be, and
// opens it with this build: everything must be there, the schema at the latest
// version, and the newest tables usable.
func TestUpgradeFromOlderSchemas(t *testing.T) {
	sub, err := embeddedMigrations(sqliteDialect)
	if err != nil {
		t.Fatal(err)
	}
	all, err := loadMigrations(sub)
	if err != nil {
		t.Fatal(err)
	}
	latest := all[len(all)-1].version
	if latest < lastRelease {
		t.Fatalf("latest migration %d is older than the last release's %d", latest, lastRelease)
	}

	type target struct {
		d     dialect
		raw   func(t *testing.T) (*sql.DB, string) // an empty database and how to open it
		open  func(ctx context.Context, where string) (Store, error)
		needs func(t *testing.T)
	}
	var pg *pgtest.Server
	targets := []target{
		{sqliteDialect,
			func(t *testing.T) (*sql.DB, string) {
				path := filepath.Join(t.TempDir(), "old.db")
				db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=foreign_keys(1)")
				if err != nil {
					t.Fatal(err)
				}
				db.SetMaxOpenConns(1)
				return db, path
			},
			func(ctx context.Context, path string) (Store, error) { return OpenSQLite(ctx, path) },
			func(*testing.T) {}},
		{postgresDialect,
			func(t *testing.T) (*sql.DB, string) {
				url := pg.URL(pg.NewDB(t))
				db, err := sql.Open("pgx", url)
				if err != nil {
					t.Fatal(err)
				}
				return db, url
			},
			func(ctx context.Context, url string) (Store, error) { return OpenPostgres(ctx, url) },
			func(t *testing.T) {
				if pg == nil {
					pg = pgtest.Start(t)
				}
			}},
	}
	for _, tg := range targets {
		t.Run(tg.d.name, func(t *testing.T) {
			tg.needs(t)
			for from := 1; from < latest; from++ {
				t.Run("from "+all[from-1].name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
					defer cancel()
					db, where := tg.raw(t)
					if err := migrate(ctx, db, tg.d, migrationsUpTo(t, tg.d, from)); err != nil {
						t.Fatalf("make version %d: %v", from, err)
					}
					for _, r := range oldRows {
						if r.since <= from {
							if _, err := db.ExecContext(ctx, r.sql, r.args...); err != nil {
								t.Fatalf("fill version %d: %s: %v", from, r.sql, err)
							}
						}
					}
					db.Close()

					s, err := tg.open(ctx, where)
					if err != nil {
						t.Fatalf("open a version-%d database: %v", from, err)
					}
					defer s.Close()
					checkUpgraded(t, ctx, s, from)
					var v int
					if err := s.(interface{ dbForTest() *sql.DB }).dbForTest().QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil || v != latest {
						t.Errorf("schema version after open = %d (%v), want %d", v, err, latest)
					}
				})
			}
		})
	}
}

func (s *sqlDB) dbForTest() *sql.DB { return s.w }

// checkUpgraded reads back through the Store what oldRows put in a database
// at version from, and writes to it.
func checkUpgraded(t *testing.T, ctx context.Context, s Store, from int) {
	t.Helper()
	u, err := s.SessionUser(ctx, oldToken)
	if err != nil || u.ID != oldUserID || u.Email != "Old@Example.org" || u.Role != RoleInstructor || !u.CreatedAt.Equal(fromDB(oldTime)) {
		t.Fatalf("SessionUser = %+v, %v; want user %d, an instructor since %v", u, err, oldUserID, fromDB(oldTime))
	}
	p, err := s.Progress(ctx, oldUserID)
	if err != nil {
		t.Fatal(err)
	}
	want := Progress{ChapterID: "ch01", Read: true, QuizPassed: true, QuizScore: 0.75, LabPassed: true, LabScore: 0.5, LabAttempts: 2, UpdatedAt: fromDB(oldTime)}
	if from >= 2 {
		want.QuizAnswers = Answers{"q1": {"a"}}
		want.Labs = map[string]LabProgress{"ch01-lab": {Passed: true, Score: 0.5, Attempts: 2}}
	}
	if got := p["ch01"]; !reflect.DeepEqual(got, want) {
		t.Errorf("progress = %+v, want %+v", got, want)
	}
	if from >= 3 {
		ex := s.(Exams)
		as, err := ex.Attempts(ctx, "m12", oldUserID)
		if err != nil || len(as) != 1 || as[0].State != AttemptSubmitted || !as[0].Passed || as[0].Score != 0.9 {
			t.Errorf("Attempts = %+v, %v; want the submitted pass", as, err)
		}
		c, err := s.(Certs).Certificate(ctx, "CL-OLD")
		if err != nil || string(c.Document) != `{"old":true}` || c.UserID != oldUserID {
			t.Errorf("Certificate = %+v, %v", c, err)
		}
	}
	// The upgraded database takes writes: a new account (its ID must not
	// collide with the old one) and another lab attempt.
	nu := &User{Email: "new@example.org", Name: "New", Role: RoleLearner}
	if err := s.CreateUser(ctx, nu); err != nil || nu.ID == oldUserID {
		t.Errorf("CreateUser after upgrade: ID %d, %v", nu.ID, err)
	}
	if err := s.RecordLab(ctx, oldUserID, "ch01", "ch01-lab", 1, true); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Progress(ctx, oldUserID); err != nil || p["ch01"].LabAttempts != 3 || p["ch01"].LabScore != 1 {
		t.Errorf("after RecordLab: %+v, %v; want 3 attempts, score 1", p["ch01"], err)
	}
	// 0006, 0007: an old learner's new lab is recorded with its replica, once
	// their running lab (the newer of two raced ones) has ended.
	owners := s.(LabOwners)
	claim := &LabOwner{LabID: "lab-after-upgrade", LearnerID: oldUserID, Replica: "http://127.0.0.1:8081", Scenario: "ch01-tour"}
	if from >= 6 {
		running, err := owners.RunningLabs(ctx, oldUserID)
		if err != nil || len(running) != 1 || running[0].LabID != "old-lab-raced" || running[0].Scenario != "" {
			t.Errorf("running labs after upgrade = %+v, %v; want old-lab-raced alone", running, err)
		}
		if err := owners.ClaimLab(ctx, claim); !errors.Is(err, ErrExists) {
			t.Errorf("a claim while old-lab-raced runs: %v, want ErrExists", err)
		}
		if err := owners.EndLab(ctx, "old-lab-raced"); err != nil {
			t.Fatal(err)
		}
	}
	if err := owners.ClaimLab(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if o, err := owners.LabOwner(ctx, "lab-after-upgrade"); err != nil || o.LearnerID != oldUserID || o.Replica != "http://127.0.0.1:8081" || o.Scenario != "ch01-tour" {
		t.Errorf("LabOwner after upgrade = %+v, %v", o, err)
	}
}

// TestNoMigrationOutsideADialect: a migration left directly in migrations/
// would not be embedded at all.
func TestNoMigrationOutsideADialect(t *testing.T) {
	stray, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stray {
		t.Errorf("%s is in no dialect: move it to migrations/sqlite/ and port it to migrations/postgres/ (same name)", f)
	}
}

// TestDialectsHaveTheSameMigrations: every schema change exists for both
// databases under the same name, so neither falls behind.
func TestDialectsHaveTheSameMigrations(t *testing.T) {
	names := func(d dialect) []string {
		sub, err := embeddedMigrations(d)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := loadMigrations(sub)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	lite, pg := names(sqliteDialect), names(postgresDialect)
	if strings.Join(lite, " ") != strings.Join(pg, " ") {
		t.Errorf("migrations differ:\n  sqlite:   %v\n  postgres: %v\nport the missing ones to server/store/migrations/<dialect>/", lite, pg)
	}
}
