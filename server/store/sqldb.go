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
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// Each dialect has its own directory of migrations, NNNN_name.sql; the same
// version does the same change in both (TestDialectsHaveTheSameMigrations).
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// maxChapterID bounds chapter IDs so a bad request cannot bloat the table.
const maxChapterID = 128

// dialect is what differs between the SQL databases sqlDB runs on. The
// queries themselves are shared: $N placeholders, TRUE/FALSE, ON CONFLICT and
// RETURNING mean the same in SQLite and PostgreSQL.
type dialect struct {
	name string
	// migrations is the directory of migrationFiles with this dialect's schema.
	migrations string
	// versionTable creates schema_migrations if it is missing.
	versionTable string
	// lockMigrations, run first in each migration's transaction, keeps two
	// processes from applying the same migration ("" where the transaction
	// itself takes the write lock).
	lockMigrations string
	// snapshot are the options of a read-only transaction whose queries all
	// see one snapshot.
	snapshot *sql.TxOptions
}

// sqlDB implements Store, Exams and Certs on database/sql for a dialect.
// Writes go through w and reads through r, which may be the same pool.
type sqlDB struct {
	w, r *sql.DB
	d    dialect
}

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

// embeddedMigrations returns d's migrations as shipped in the binary.
func embeddedMigrations(d dialect) (fs.FS, error) {
	return fs.Sub(migrationFiles, d.migrations)
}

// migrate applies the pending migrations of fsys, each in its own
// transaction together with its schema_migrations row, so a failed
// migration leaves the database at the previous version.
func migrate(ctx context.Context, db *sql.DB, d dialect, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version
	for _, m := range ms {
		if err := applyMigration(ctx, db, d, m, latest); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless the database already has it. It reads the
// current version inside the locked transaction so two processes opening the
// same database cannot both apply m.
func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration, latest int) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if d.lockMigrations != "" {
		if _, err := tx.ExecContext(ctx, d.lockMigrations); err != nil {
			return fmt.Errorf("migration %s: lock: %w", m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.versionTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
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
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
		m.version, m.name, toDB(time.Now())); err != nil {
		return fmt.Errorf("migration %s: record: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return nil
}

// Times are stored as microseconds since the epoch, in both dialects: exact,
// sortable, and the resolution PostgreSQL's timestamptz has too.
func toDB(t time.Time) int64 { return t.UnixMicro() }

func fromDB(us int64) time.Time { return time.UnixMicro(us).UTC() }

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func emailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// isUnique reports whether err is a violated UNIQUE or PRIMARY KEY
// constraint, from either database.
func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || pgCode(err) == pgUniqueViolation
}

// isForeignKey reports whether err is a violated FOREIGN KEY constraint,
// from either database.
func isForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY || pgCode(err) == pgForeignKeyViolation
}

// userMissing maps a foreign-key violation on user_id to ErrNotFound.
func userMissing(err error, userID int64) error {
	if isForeignKey(err) {
		return fmt.Errorf("user %d: %w", userID, ErrNotFound)
	}
	return err
}

// greatest is the larger of two numeric columns: SQLite's two-argument MAX and
// PostgreSQL's GREATEST are spelled differently; CASE is the same in both.
func greatest(a, b string) string {
	return "CASE WHEN " + b + " > " + a + " THEN " + b + " ELSE " + a + " END"
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
func (s *sqlDB) CreateUser(ctx context.Context, u *User) error {
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
		"INSERT INTO users (email, email_key, name, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
		u.Email, emailKey(u.Email), u.Name, string(u.Role), u.PasswordHash, toDB(created)).Scan(&id)
	if isUnique(err) {
		return fmt.Errorf("create user %s: %w", u.Email, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.Email, err)
	}
	u.ID, u.CreatedAt = id, created
	return nil
}

// UserByEmail implements Store.
func (s *sqlDB) UserByEmail(ctx context.Context, email string) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE email_key = $1", emailKey(email)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %s: %w", email, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", email, err)
	}
	return u, nil
}

// UserByID implements Store.
func (s *sqlDB) UserByID(ctx context.Context, id int64) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE id = $1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// ListUsers implements Store.
func (s *sqlDB) ListUsers(ctx context.Context) ([]User, error) {
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
func (s *sqlDB) updateUser(ctx context.Context, what string, userID int64, query string, args ...any) error {
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
func (s *sqlDB) SetRole(ctx context.Context, userID int64, r Role) error {
	if !r.Valid() {
		return fmt.Errorf("set role of user %d: %w: role %q (want learner, instructor or admin)", userID, ErrInvalid, r)
	}
	return s.updateUser(ctx, "set role", userID, "UPDATE users SET role = $1 WHERE id = $2", string(r), userID)
}

// SetPasswordHash implements Store.
func (s *sqlDB) SetPasswordHash(ctx context.Context, userID int64, hash string) error {
	return s.updateUser(ctx, "set password", userID, "UPDATE users SET password_hash = $1 WHERE id = $2", hash, userID)
}

// CountUsers implements Store.
func (s *sqlDB) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// CreateSession implements Store.
func (s *sqlDB) CreateSession(ctx context.Context, userID int64, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("create session for user %d: %w: ttl %v must be positive", userID, ErrInvalid, ttl)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create session for user %d: %w", userID, err)
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	t := now()
	_, err := s.w.ExecContext(ctx, "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
		hashToken(token), userID, toDB(t), toDB(t.Add(ttl)))
	if err != nil {
		return "", fmt.Errorf("create session: %w", userMissing(err, userID))
	}
	return token, nil
}

// SessionUser implements Store.
func (s *sqlDB) SessionUser(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	u, err := scanUser(s.r.QueryRowContext(ctx,
		"SELECT u.id, u.email, u.name, u.role, u.password_hash, u.created_at FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires_at > $2",
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
func (s *sqlDB) DeleteSession(ctx context.Context, token string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE token_hash = $1", hashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteUserSessions implements Store.
func (s *sqlDB) DeleteUserSessions(ctx context.Context, userID int64) (int64, error) {
	res, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE user_id = $1", userID)
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
func (s *sqlDB) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	res, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at <= $1", toDB(time.Now()))
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
// merges them into the existing row with onConflict, where the existing row
// is "progress" and the new one "excluded". One statement, so concurrent
// recorders cannot lose each other's updates.
func upsertProgress(ctx context.Context, db execer, what string, userID int64, chapterID string, cols string, vals []any, onConflict string) error {
	if err := checkChapter(chapterID); err != nil {
		return fmt.Errorf("%s for user %d: %w", what, userID, err)
	}
	args := append([]any{userID, chapterID, toDB(now())}, vals...)
	ph := make([]string, len(args))
	for i := range args {
		ph[i] = "$" + strconv.Itoa(i+1)
	}
	q := "INSERT INTO progress (user_id, chapter_id, updated_at, " + cols + ") VALUES (" + strings.Join(ph, ", ") + ")" +
		" ON CONFLICT (user_id, chapter_id) DO UPDATE SET updated_at = excluded.updated_at, " + onConflict
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s for user %d chapter %s: %w", what, userID, chapterID, userMissing(err, userID))
	}
	return nil
}

// MarkRead implements Store.
func (s *sqlDB) MarkRead(ctx context.Context, userID int64, chapterID string) error {
	return upsertProgress(ctx, s.w, "mark read", userID, chapterID, "is_read", []any{true}, "is_read = TRUE")
}

// RecordQuiz implements Store.
func (s *sqlDB) RecordQuiz(ctx context.Context, userID int64, chapterID string, score float64, passed bool, answers Answers) error {
	if err := checkScore(score); err != nil {
		return fmt.Errorf("record quiz for user %d chapter %s: %w", userID, chapterID, err)
	}
	given, err := json.Marshal(answers)
	if err != nil {
		return fmt.Errorf("record quiz for user %d chapter %s: %w", userID, chapterID, err)
	}
	return upsertProgress(ctx, s.w, "record quiz", userID, chapterID, "quiz_score, quiz_passed, quiz_answers", []any{score, passed, string(given)},
		"quiz_score = "+greatest("progress.quiz_score", "excluded.quiz_score")+
			", quiz_passed = progress.quiz_passed OR excluded.quiz_passed, quiz_answers = excluded.quiz_answers")
}

// RecordLab implements Store. The lab's row and the chapter's summary change
// in one transaction.
func (s *sqlDB) RecordLab(ctx context.Context, userID int64, chapterID, labID string, score float64, passed bool) (err error) {
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
		"lab_score = "+greatest("progress.lab_score", "excluded.lab_score")+
			", lab_passed = progress.lab_passed OR excluded.lab_passed, lab_attempts = progress.lab_attempts + 1"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO lab_progress (user_id, lab_id, chapter_id, score, passed, attempts, updated_at) VALUES ($1, $2, $3, $4, $5, 1, $6)"+
		" ON CONFLICT (user_id, lab_id) DO UPDATE SET score = "+greatest("lab_progress.score", "excluded.score")+
		", passed = lab_progress.passed OR excluded.passed, attempts = lab_progress.attempts + 1, chapter_id = excluded.chapter_id, updated_at = excluded.updated_at",
		userID, labID, chapterID, score, passed, toDB(now())); err != nil {
		return fmt.Errorf("record lab for user %d lab %s: %w", userID, labID, userMissing(err, userID))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record lab for user %d lab %s: commit: %w", userID, labID, err)
	}
	return nil
}

// Progress implements Store. Both queries read one snapshot.
func (s *sqlDB) Progress(ctx context.Context, userID int64) (map[string]Progress, error) {
	tx, err := s.r.BeginTx(ctx, s.d.snapshot)
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
		"SELECT chapter_id, is_read, quiz_passed, quiz_score, quiz_answers, lab_passed, lab_score, lab_attempts, updated_at FROM progress WHERE user_id = $1", userID)
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
	rows, err := tx.QueryContext(ctx, "SELECT chapter_id, lab_id, passed, score, attempts FROM lab_progress WHERE user_id = $1", userID)
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

// ping checks both pools.
func (s *sqlDB) ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return err
	}
	return s.r.PingContext(ctx)
}
