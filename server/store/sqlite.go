package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// busyTimeout is how long a connection waits for another process's write
// lock before failing with "database is locked".
const busyTimeout = 10 * time.Second

// maxChapterID bounds chapter IDs so a bad request cannot bloat the table.
const maxChapterID = 128

// SQLite is the Store on one SQLite file in WAL mode.
//
// It holds two pools on the same file. SQLite allows one writer at a time,
// so all writes go through a single connection: they queue in Go (bounded by
// ctx) instead of spinning on SQLITE_BUSY. Reads use their own pool and run
// beside the writer, which WAL permits. busy_timeout still covers other
// processes opening the same file (e.g. an admin command).
type SQLite struct {
	w    *sql.DB
	r    *sql.DB
	path string
}

var _ Store = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) the database at path, with its
// parent directory (0700) and the file itself (0600), and applies pending
// migrations. A database migrated by a newer binary is refused with
// ErrSchemaTooNew.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
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

	s := &SQLite{path: abs}
	pragmas := "?_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")&_pragma=foreign_keys(1)"
	if s.w, err = sql.Open("sqlite", abs+pragmas+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"); err != nil {
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
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	if err := migrate(ctx, s.w, sub); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}

	if s.r, err = sql.Open("sqlite", abs+pragmas+"&_pragma=query_only(1)"); err != nil {
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

// migration is one embedded schema change, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// loadMigrations reads the *.sql files of fsys, sorted by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s: name must look like 0001_what_it_does.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v == 0 {
			return nil, fmt.Errorf("migration %s: versions start at 0001", e.Name())
		}
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migration %s: version %d already used by %s", e.Name(), v, prev)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations found")
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the pending migrations of fsys, each in its own
// transaction together with its schema_migrations row, so a failed
// migration leaves the database at the previous version.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, latest); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless the database already has it. It reads the
// current version inside the (immediate, write-locked) transaction so two
// processes opening the same file cannot both apply m.
func applyMigration(ctx context.Context, db *sql.DB, m migration, latest int) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var cur int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if cur > latest {
		return fmt.Errorf("%w: database is at version %d, this binary knows versions up to %d; run a newer commlab or restore a backup", ErrSchemaTooNew, cur, latest)
	}
	if m.version <= cur {
		return tx.Rollback()
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
		m.version, m.name, toDB(time.Now())); err != nil {
		return fmt.Errorf("migration %s: record: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return nil
}

// Times are stored as microseconds since the epoch: exact, sortable, and the
// resolution PostgreSQL's timestamptz has too.
func toDB(t time.Time) int64 { return t.UnixMicro() }

func fromDB(us int64) time.Time { return time.UnixMicro(us).UTC() }

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func emailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// sqliteCode returns the extended result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// userMissing maps a foreign-key violation on user_id to ErrNotFound.
func userMissing(err error, userID int64) error {
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return fmt.Errorf("user %d: %w", userID, ErrNotFound)
	}
	return err
}

const userColumns = "id, email, name, role, password_hash, created_at"

type scanner interface{ Scan(dest ...any) error }

func scanUser(row scanner) (*User, error) {
	var u User
	var created int64
	if err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.PasswordHash, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = fromDB(created)
	return &u, nil
}

// CreateUser implements Store.
func (s *SQLite) CreateUser(ctx context.Context, u *User) error {
	if u == nil {
		return fmt.Errorf("create user: %w: nil user", ErrInvalid)
	}
	if emailKey(u.Email) == "" {
		return fmt.Errorf("create user: %w: empty email", ErrInvalid)
	}
	if !u.Role.Valid() {
		return fmt.Errorf("create user %s: %w: role %q (want learner, instructor or admin)", u.Email, ErrInvalid, u.Role)
	}
	created := now()
	var id int64
	err := s.w.QueryRowContext(ctx,
		"INSERT INTO users (email, email_key, name, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
		u.Email, emailKey(u.Email), u.Name, string(u.Role), u.PasswordHash, toDB(created)).Scan(&id)
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return fmt.Errorf("create user %s: %w", u.Email, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.Email, err)
	}
	u.ID, u.CreatedAt = id, created
	return nil
}

// UserByEmail implements Store.
func (s *SQLite) UserByEmail(ctx context.Context, email string) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE email_key = ?", emailKey(email)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %s: %w", email, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", email, err)
	}
	return u, nil
}

// UserByID implements Store.
func (s *SQLite) UserByID(ctx context.Context, id int64) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// ListUsers implements Store.
func (s *SQLite) ListUsers(ctx context.Context) ([]User, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+userColumns+" FROM users ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var us []User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		us = append(us, *u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

// updateUser runs a one-row UPDATE on users and reports ErrNotFound when no
// row matched.
func (s *SQLite) updateUser(ctx context.Context, what string, userID int64, query string, args ...any) error {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s of user %d: %w", what, userID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s of user %d: %w", what, userID, err)
	}
	if n == 0 {
		return fmt.Errorf("%s of user %d: %w", what, userID, ErrNotFound)
	}
	return nil
}

// SetRole implements Store.
func (s *SQLite) SetRole(ctx context.Context, userID int64, r Role) error {
	if !r.Valid() {
		return fmt.Errorf("set role of user %d: %w: role %q (want learner, instructor or admin)", userID, ErrInvalid, r)
	}
	return s.updateUser(ctx, "set role", userID, "UPDATE users SET role = ? WHERE id = ?", string(r), userID)
}

// SetPasswordHash implements Store.
func (s *SQLite) SetPasswordHash(ctx context.Context, userID int64, hash string) error {
	return s.updateUser(ctx, "set password", userID, "UPDATE users SET password_hash = ? WHERE id = ?", hash, userID)
}

// CountUsers implements Store.
func (s *SQLite) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// CreateSession implements Store.
func (s *SQLite) CreateSession(ctx context.Context, userID int64, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("create session for user %d: %w: ttl %v must be positive", userID, ErrInvalid, ttl)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create session for user %d: %w", userID, err)
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	t := now()
	_, err := s.w.ExecContext(ctx, "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
		hashToken(token), userID, toDB(t), toDB(t.Add(ttl)))
	if err != nil {
		return "", fmt.Errorf("create session: %w", userMissing(err, userID))
	}
	return token, nil
}

// SessionUser implements Store.
func (s *SQLite) SessionUser(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	u, err := scanUser(s.r.QueryRowContext(ctx,
		"SELECT u.id, u.email, u.name, u.role, u.password_hash, u.created_at FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ? AND s.expires_at > ?",
		hashToken(token), toDB(time.Now())))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return u, nil
}

// DeleteSession implements Store.
func (s *SQLite) DeleteSession(ctx context.Context, token string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE token_hash = ?", hashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteUserSessions implements Store.
func (s *SQLite) DeleteUserSessions(ctx context.Context, userID int64) (int64, error) {
	res, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE user_id = ?", userID)
	if err != nil {
		return 0, fmt.Errorf("delete sessions of user %d: %w", userID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete sessions of user %d: %w", userID, err)
	}
	return n, nil
}

// DeleteExpiredSessions implements Store.
func (s *SQLite) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	res, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at <= ?", toDB(time.Now()))
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return n, nil
}

func checkChapter(chapterID string) error {
	if chapterID == "" || len(chapterID) > maxChapterID {
		return fmt.Errorf("%w: chapter ID %q must be 1 to %d bytes", ErrInvalid, chapterID, maxChapterID)
	}
	return nil
}

func checkScore(score float64) error {
	if math.IsNaN(score) || score < 0 || score > 1 {
		return fmt.Errorf("%w: score %v must be a fraction in [0, 1]", ErrInvalid, score)
	}
	return nil
}

// execer is what upsertProgress writes through: the writer pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// upsertProgress inserts the (user, chapter) row with the given values, or
// merges them into the existing row with onConflict. One statement, so
// concurrent recorders cannot lose each other's updates.
func upsertProgress(ctx context.Context, db execer, what string, userID int64, chapterID string, cols string, vals []any, onConflict string) error {
	if err := checkChapter(chapterID); err != nil {
		return fmt.Errorf("%s for user %d: %w", what, userID, err)
	}
	args := append([]any{userID, chapterID, toDB(now())}, vals...)
	q := "INSERT INTO progress (user_id, chapter_id, updated_at, " + cols + ") VALUES (?, ?, ?" + strings.Repeat(", ?", len(vals)) + ")" +
		" ON CONFLICT (user_id, chapter_id) DO UPDATE SET updated_at = excluded.updated_at, " + onConflict
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s for user %d chapter %s: %w", what, userID, chapterID, userMissing(err, userID))
	}
	return nil
}

// MarkRead implements Store.
func (s *SQLite) MarkRead(ctx context.Context, userID int64, chapterID string) error {
	return upsertProgress(ctx, s.w, "mark read", userID, chapterID, "is_read", []any{1}, "is_read = 1")
}

// RecordQuiz implements Store.
func (s *SQLite) RecordQuiz(ctx context.Context, userID int64, chapterID string, score float64, passed bool, answers Answers) error {
	if err := checkScore(score); err != nil {
		return fmt.Errorf("record quiz for user %d chapter %s: %w", userID, chapterID, err)
	}
	given, err := json.Marshal(answers)
	if err != nil {
		return fmt.Errorf("record quiz for user %d chapter %s: %w", userID, chapterID, err)
	}
	return upsertProgress(ctx, s.w, "record quiz", userID, chapterID, "quiz_score, quiz_passed, quiz_answers", []any{score, passed, string(given)},
		"quiz_score = MAX(quiz_score, excluded.quiz_score), quiz_passed = MAX(quiz_passed, excluded.quiz_passed), quiz_answers = excluded.quiz_answers")
}

// RecordLab implements Store. The lab's row and the chapter's summary change
// in one transaction.
func (s *SQLite) RecordLab(ctx context.Context, userID int64, chapterID, labID string, score float64, passed bool) (err error) {
	if err := checkScore(score); err != nil {
		return fmt.Errorf("record lab for user %d chapter %s: %w", userID, chapterID, err)
	}
	if labID == "" || len(labID) > maxChapterID {
		return fmt.Errorf("record lab for user %d: %w: lab ID %q must be 1 to %d bytes", userID, ErrInvalid, labID, maxChapterID)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record lab for user %d lab %s: %w", userID, labID, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err := upsertProgress(ctx, tx, "record lab", userID, chapterID, "lab_score, lab_passed, lab_attempts", []any{score, passed, 1},
		"lab_score = MAX(lab_score, excluded.lab_score), lab_passed = MAX(lab_passed, excluded.lab_passed), lab_attempts = lab_attempts + 1"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO lab_progress (user_id, lab_id, chapter_id, score, passed, attempts, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?)"+
		" ON CONFLICT (user_id, lab_id) DO UPDATE SET score = MAX(score, excluded.score), passed = MAX(passed, excluded.passed),"+
		" attempts = attempts + 1, chapter_id = excluded.chapter_id, updated_at = excluded.updated_at",
		userID, labID, chapterID, score, passed, toDB(now())); err != nil {
		return fmt.Errorf("record lab for user %d lab %s: %w", userID, labID, userMissing(err, userID))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record lab for user %d lab %s: commit: %w", userID, labID, err)
	}
	return nil
}

// Progress implements Store. Both queries read one snapshot.
func (s *SQLite) Progress(ctx context.Context, userID int64) (map[string]Progress, error) {
	tx, err := s.r.BeginTx(ctx, nil) // the reader pool is query_only
	if err != nil {
		return nil, fmt.Errorf("progress of user %d: %w", userID, err)
	}
	defer tx.Rollback()
	out, err := chapterProgress(ctx, tx, userID)
	if err != nil {
		return nil, fmt.Errorf("progress of user %d: %w", userID, err)
	}
	if err := addLabProgress(ctx, tx, userID, out); err != nil {
		return nil, fmt.Errorf("lab progress of user %d: %w", userID, err)
	}
	return out, nil
}

func chapterProgress(ctx context.Context, tx *sql.Tx, userID int64) (map[string]Progress, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT chapter_id, is_read, quiz_passed, quiz_score, quiz_answers, lab_passed, lab_score, lab_attempts, updated_at FROM progress WHERE user_id = ?", userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Progress{}
	for rows.Next() {
		var p Progress
		var answers string
		var updated int64
		if err := rows.Scan(&p.ChapterID, &p.Read, &p.QuizPassed, &p.QuizScore, &answers, &p.LabPassed, &p.LabScore, &p.LabAttempts, &updated); err != nil {
			return nil, err
		}
		if answers != "" {
			if err := json.Unmarshal([]byte(answers), &p.QuizAnswers); err != nil {
				return nil, fmt.Errorf("chapter %s: quiz answers: %w", p.ChapterID, err)
			}
		}
		p.UpdatedAt = fromDB(updated)
		out[p.ChapterID] = p
	}
	return out, rows.Err()
}

func addLabProgress(ctx context.Context, tx *sql.Tx, userID int64, out map[string]Progress) error {
	rows, err := tx.QueryContext(ctx, "SELECT chapter_id, lab_id, passed, score, attempts FROM lab_progress WHERE user_id = ?", userID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ch, lab string
		var l LabProgress
		if err := rows.Scan(&ch, &lab, &l.Passed, &l.Score, &l.Attempts); err != nil {
			return err
		}
		p := out[ch]
		p.ChapterID = ch
		if p.Labs == nil {
			p.Labs = map[string]LabProgress{}
		}
		p.Labs[lab] = l
		out[ch] = p
	}
	return rows.Err()
}

// Ping implements Store.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", s.path, err)
	}
	if err := s.r.PingContext(ctx); err != nil {
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
