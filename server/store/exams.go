package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AttemptState is where an exam attempt stands.
type AttemptState string

// The attempt states.
const (
	AttemptActive    AttemptState = "active"
	AttemptSubmitted AttemptState = "submitted"
	AttemptVoided    AttemptState = "voided"
)

// Attempt is one candidate's sitting of one exam. Seed draws its tasks and
// their variants and must never reach the candidate.
type Attempt struct {
	ID          int64
	UserID      int64
	ExamID      string
	Seed        []byte
	State       AttemptState
	StartedAt   time.Time
	Deadline    time.Time
	SubmittedAt time.Time // zero while active
	Auto        bool      // submitted by the clock
	Score       float64
	Passed      bool
	VoidReason  string
	VoidedBy    int64
}

// AttemptTask is one task of an attempt: the answer last saved and, once
// graded, its score and the report (JSON) it rests on.
type AttemptTask struct {
	Task    int
	Answer  string
	SavedAt time.Time
	Graded  bool
	Score   float64
	Report  string
}

// Command is one command a candidate typed during an attempt.
type Command struct {
	Task    int
	Node    string
	Command string
	At      time.Time
}

// ExamSwitch is an admin's last word on whether an exam takes new attempts.
type ExamSwitch struct {
	ExamID   string
	Disabled bool
	Note     string // shown to candidates while disabled
	By       int64
	At       time.Time
}

// Exams keeps exam attempts. SQLite and PostgreSQL implement it beside Store.
type Exams interface {
	// SetExamSwitch records whether an exam takes new attempts (sw.At is
	// set to now). An exam never switched is enabled.
	SetExamSwitch(ctx context.Context, sw ExamSwitch) error
	// ExamSwitches returns the exams ever switched, by exam id.
	ExamSwitches(ctx context.Context) (map[string]ExamSwitch, error)
	// StartAttempt inserts a (active) and sets its ID. ErrExists if the user
	// already has an active attempt at any exam.
	StartAttempt(ctx context.Context, a *Attempt) error
	// Attempt returns one; ErrNotFound if none.
	Attempt(ctx context.Context, id int64) (*Attempt, error)
	// ActiveAttempt returns the user's active attempt; ErrNotFound if none.
	ActiveAttempt(ctx context.Context, userID int64) (*Attempt, error)
	// Attempts lists attempts, newest first: of one exam, of one user (0 for
	// any), or all.
	Attempts(ctx context.Context, examID string, userID int64) ([]Attempt, error)
	// SaveAnswer keeps a task's answer; ErrInvalid unless the attempt is active.
	SaveAnswer(ctx context.Context, attemptID int64, task int, answer string) error
	// GradeTask records a task's score and report.
	GradeTask(ctx context.Context, attemptID int64, task int, score float64, report string) error
	// Tasks returns the attempt's tasks that were saved or graded, by task.
	Tasks(ctx context.Context, attemptID int64) ([]AttemptTask, error)
	// LogCommand keeps a typed command with the attempt.
	LogCommand(ctx context.Context, attemptID int64, c Command) error
	// Commands returns the attempt's commands in the order typed.
	Commands(ctx context.Context, attemptID int64) ([]Command, error)
	// ExtendDeadline moves an active attempt's deadline d later (the clock
	// paused while a lab started); ErrInvalid unless it is active.
	ExtendDeadline(ctx context.Context, id int64, d time.Duration) error
	// SubmitAttempt ends an active attempt with its score; ErrInvalid if it
	// is not active (so a double submit grades once).
	SubmitAttempt(ctx context.Context, id int64, score float64, passed, auto bool) error
	// VoidAttempt voids a submitted or active attempt with a reason.
	VoidAttempt(ctx context.Context, id, by int64, reason string) error
}

var _ Exams = (*sqlDB)(nil)

// SetExamSwitch implements Exams.
func (s *sqlDB) SetExamSwitch(ctx context.Context, sw ExamSwitch) error {
	if sw.ExamID == "" {
		return fmt.Errorf("switch exam: %w: exam id is required", ErrInvalid)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO exam_switches (exam_id, disabled, note, changed_by, changed_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (exam_id) DO UPDATE SET disabled = excluded.disabled, note = excluded.note,
		changed_by = excluded.changed_by, changed_at = excluded.changed_at`,
		sw.ExamID, sw.Disabled, strings.TrimSpace(sw.Note), nullID(sw.By), toDB(now()))
	if err != nil {
		return fmt.Errorf("switch exam %s: %w", sw.ExamID, userMissing(err, sw.By))
	}
	return nil
}

// ExamSwitches implements Exams.
func (s *sqlDB) ExamSwitches(ctx context.Context) (map[string]ExamSwitch, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT exam_id, disabled, note, COALESCE(changed_by, 0), changed_at FROM exam_switches`)
	if err != nil {
		return nil, fmt.Errorf("exam switches: %w", err)
	}
	defer rows.Close()
	out := map[string]ExamSwitch{}
	for rows.Next() {
		var sw ExamSwitch
		var at int64
		if err := rows.Scan(&sw.ExamID, &sw.Disabled, &sw.Note, &sw.By, &at); err != nil {
			return nil, fmt.Errorf("exam switches: %w", err)
		}
		sw.At = fromDB(at)
		out[sw.ExamID] = sw
	}
	return out, rows.Err()
}

// StartAttempt implements Exams.
func (s *sqlDB) StartAttempt(ctx context.Context, a *Attempt) error {
	if a.ExamID == "" || len(a.Seed) < 16 || !a.Deadline.After(a.StartedAt) {
		return fmt.Errorf("start attempt: %w: exam id, a seed of 16+ bytes and a deadline after the start are required", ErrInvalid)
	}
	a.State = AttemptActive
	err := s.w.QueryRowContext(ctx, `INSERT INTO exam_attempts (user_id, exam_id, seed, state, started_at, deadline_at)
		VALUES ($1, $2, $3, 'active', $4, $5) RETURNING id`, a.UserID, a.ExamID, a.Seed, toDB(a.StartedAt), toDB(a.Deadline)).Scan(&a.ID)
	if isUnique(err) {
		return fmt.Errorf("start attempt: user %d: %w: an attempt is active", a.UserID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("start attempt: %w", userMissing(err, a.UserID))
	}
	return nil
}

const attemptColumns = "id, user_id, exam_id, seed, state, started_at, deadline_at, submitted_at, auto, score, passed, void_reason, COALESCE(voided_by, 0)"

func scanAttempt(row scanner) (*Attempt, error) {
	var a Attempt
	var started, deadline int64
	var submitted sql.NullInt64
	if err := row.Scan(&a.ID, &a.UserID, &a.ExamID, &a.Seed, &a.State, &started, &deadline, &submitted, &a.Auto, &a.Score, &a.Passed, &a.VoidReason, &a.VoidedBy); err != nil {
		return nil, err
	}
	a.StartedAt, a.Deadline = fromDB(started), fromDB(deadline)
	if submitted.Valid {
		a.SubmittedAt = fromDB(submitted.Int64)
	}
	return &a, nil
}

func (s *sqlDB) oneAttempt(ctx context.Context, what, where string, arg any) (*Attempt, error) {
	a, err := scanAttempt(s.r.QueryRowContext(ctx, "SELECT "+attemptColumns+" FROM exam_attempts WHERE "+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// Attempt implements Exams.
func (s *sqlDB) Attempt(ctx context.Context, id int64) (*Attempt, error) {
	return s.oneAttempt(ctx, fmt.Sprintf("attempt %d", id), "id = $1", id)
}

// ActiveAttempt implements Exams.
func (s *sqlDB) ActiveAttempt(ctx context.Context, userID int64) (*Attempt, error) {
	return s.oneAttempt(ctx, fmt.Sprintf("active attempt of user %d", userID), "user_id = $1 AND state = 'active'", userID)
}

// Attempts implements Exams.
func (s *sqlDB) Attempts(ctx context.Context, examID string, userID int64) ([]Attempt, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+attemptColumns+` FROM exam_attempts
		WHERE (exam_id = $1 OR $1 = '') AND (user_id = $2 OR $2 = 0) ORDER BY started_at DESC, id DESC`, examID, userID)
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("attempts: %w", err)
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}

// SaveAnswer implements Exams.
func (s *sqlDB) SaveAnswer(ctx context.Context, attemptID int64, task int, answer string) error {
	res, err := s.w.ExecContext(ctx, `INSERT INTO exam_tasks (attempt_id, task, answer, saved_at)
		SELECT id, $1, $2, $3 FROM exam_attempts WHERE id = $4 AND state = 'active'
		ON CONFLICT (attempt_id, task) DO UPDATE SET answer = excluded.answer, saved_at = excluded.saved_at`,
		task, answer, toDB(now()), attemptID)
	if err != nil {
		return fmt.Errorf("save answer %d/%d: %w", attemptID, task, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("save answer %d/%d: %w: attempt is not active", attemptID, task, ErrInvalid)
	}
	return nil
}

// GradeTask implements Exams.
func (s *sqlDB) GradeTask(ctx context.Context, attemptID int64, task int, score float64, report string) error {
	if err := checkScore(score); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO exam_tasks (attempt_id, task, graded, score, report) VALUES ($1, $2, TRUE, $3, $4)
		ON CONFLICT (attempt_id, task) DO UPDATE SET graded = TRUE, score = excluded.score, report = excluded.report`,
		attemptID, task, score, report)
	if err != nil {
		return fmt.Errorf("grade task %d/%d: %w", attemptID, task, err)
	}
	return nil
}

// Tasks implements Exams.
func (s *sqlDB) Tasks(ctx context.Context, attemptID int64) ([]AttemptTask, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT task, answer, saved_at, graded, score, report FROM exam_tasks WHERE attempt_id = $1 ORDER BY task`, attemptID)
	if err != nil {
		return nil, fmt.Errorf("tasks of attempt %d: %w", attemptID, err)
	}
	defer rows.Close()
	var out []AttemptTask
	for rows.Next() {
		var t AttemptTask
		var saved int64
		if err := rows.Scan(&t.Task, &t.Answer, &saved, &t.Graded, &t.Score, &t.Report); err != nil {
			return nil, fmt.Errorf("tasks of attempt %d: %w", attemptID, err)
		}
		if saved != 0 {
			t.SavedAt = fromDB(saved)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// LogCommand implements Exams.
func (s *sqlDB) LogCommand(ctx context.Context, attemptID int64, c Command) error {
	at := c.At
	if at.IsZero() {
		at = now()
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO exam_commands (attempt_id, task, node, command, at) VALUES ($1, $2, $3, $4, $5)`,
		attemptID, c.Task, c.Node, c.Command, toDB(at)); err != nil {
		return fmt.Errorf("log command of attempt %d: %w", attemptID, err)
	}
	return nil
}

// Commands implements Exams.
func (s *sqlDB) Commands(ctx context.Context, attemptID int64) ([]Command, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT task, node, command, at FROM exam_commands WHERE attempt_id = $1 ORDER BY id`, attemptID)
	if err != nil {
		return nil, fmt.Errorf("commands of attempt %d: %w", attemptID, err)
	}
	defer rows.Close()
	var out []Command
	for rows.Next() {
		var c Command
		var at int64
		if err := rows.Scan(&c.Task, &c.Node, &c.Command, &at); err != nil {
			return nil, fmt.Errorf("commands of attempt %d: %w", attemptID, err)
		}
		c.At = fromDB(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// ExtendDeadline implements Exams.
func (s *sqlDB) ExtendDeadline(ctx context.Context, id int64, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("extend attempt %d: %w: negative %s", id, ErrInvalid, d)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE exam_attempts SET deadline_at = deadline_at + $1 WHERE id = $2 AND state = 'active'`,
		d.Microseconds(), id)
	if err != nil {
		return fmt.Errorf("extend attempt %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("extend attempt %d: %w: not active", id, ErrInvalid)
	}
	return nil
}

// SubmitAttempt implements Exams.
func (s *sqlDB) SubmitAttempt(ctx context.Context, id int64, score float64, passed, auto bool) error {
	if err := checkScore(score); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE exam_attempts SET state = 'submitted', submitted_at = $1, score = $2, passed = $3, auto = $4
		WHERE id = $5 AND state = 'active'`, toDB(now()), score, passed, auto, id)
	if err != nil {
		return fmt.Errorf("submit attempt %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("submit attempt %d: %w: not active", id, ErrInvalid)
	}
	return nil
}

// VoidAttempt implements Exams.
func (s *sqlDB) VoidAttempt(ctx context.Context, id, by int64, reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fmt.Errorf("void attempt %d: %w: a reason is required", id, ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE exam_attempts SET state = 'voided', passed = FALSE, void_reason = $1, voided_by = $2,
		submitted_at = COALESCE(submitted_at, $3) WHERE id = $4 AND state != 'voided'`, reason, nullID(by), toDB(now()), id)
	if err != nil {
		return fmt.Errorf("void attempt %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("void attempt %d: %w", id, ErrNotFound)
	}
	return nil
}
