package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workshop is an instructor's cohort: its labs (scenario ids) in order, of
// which the first Opened are open to the learners.
type Workshop struct {
	ID           int64
	InstructorID int64
	Title        string
	Code         string // learners join with it
	Labs         []string
	Opened       int
	LabTTL       time.Duration
	StartsAt     time.Time
	EndsAt       time.Time
	EndedAt      time.Time // zero until the instructor ends it
}

// Ended says whether the workshop was ended.
func (w *Workshop) Ended() bool { return !w.EndedAt.IsZero() }

// Member is a workshop member as the instructor's dashboard shows them: their
// name and their record in each of the workshop's labs they were graded in.
type Member struct {
	ID   int64
	Name string
	Labs map[string]LabProgress // by lab (scenario) ID; nil when none
}

// WorkshopEvent is one line of a workshop's journal. LearnerID is the learner
// it concerns, 0 for everyone. Public is what learners may read; Secret (the
// fault an instructor injected) is for the instructor and the debrief.
type WorkshopEvent struct {
	ID         int64
	WorkshopID int64
	LearnerID  int64
	Kind       string
	Public     string
	Secret     string
	At         time.Time
}

// Workshops keeps workshops, their members and their journal. SQLite and
// PostgreSQL implement it beside Store.
type Workshops interface {
	// CreateWorkshop inserts w and sets its ID. A title, a code, one lab or
	// more, a positive lab TTL and an end after the start are required
	// (ErrInvalid); a code in use gives ErrExists.
	CreateWorkshop(ctx context.Context, w *Workshop) error
	// Workshop returns one; ErrNotFound if none.
	Workshop(ctx context.Context, id int64) (*Workshop, error)
	// WorkshopByCode finds a workshop by join code, ignoring case and spaces.
	WorkshopByCode(ctx context.Context, code string) (*Workshop, error)
	// WorkshopsOf lists the workshops a user runs or joined, newest first.
	WorkshopsOf(ctx context.Context, userID int64) ([]Workshop, error)
	// JoinWorkshop makes userID a member; joining twice is not an error.
	JoinWorkshop(ctx context.Context, workshopID, userID int64) error
	// Members lists the members' ids in the order they joined.
	Members(ctx context.Context, workshopID int64) ([]int64, error)
	// Roster lists w's members in the order they joined, with their names and
	// their records in w's labs: one query, whatever the cohort's size.
	Roster(ctx context.Context, w *Workshop) ([]Member, error)
	// OpenLabs sets how many labs are open (ErrInvalid outside 0..len(Labs)).
	OpenLabs(ctx context.Context, workshopID int64, n int) error
	// EndWorkshop marks it ended; ending twice keeps the first time.
	EndWorkshop(ctx context.Context, workshopID int64) error
	// LogWorkshopEvent appends e to the journal and sets its ID and time.
	LogWorkshopEvent(ctx context.Context, e *WorkshopEvent) error
	// WorkshopEvents returns the journal in order: every event when learnerID
	// is 0, else those for everyone and those for that learner.
	WorkshopEvents(ctx context.Context, workshopID, learnerID int64) ([]WorkshopEvent, error)
}

var _ Workshops = (*sqlDB)(nil)

// NormalizeCode is how join codes compare: upper case, no spaces or dashes.
func NormalizeCode(code string) string {
	return strings.ToUpper(strings.NewReplacer(" ", "", "-", "").Replace(strings.TrimSpace(code)))
}

// CreateWorkshop implements Workshops.
func (s *sqlDB) CreateWorkshop(ctx context.Context, w *Workshop) error {
	w.Code = NormalizeCode(w.Code)
	switch {
	case strings.TrimSpace(w.Title) == "", w.Code == "", len(w.Labs) == 0:
		return fmt.Errorf("create workshop: %w: a title, a join code and one lab or more are required", ErrInvalid)
	case w.LabTTL < time.Minute:
		return fmt.Errorf("create workshop: %w: lab TTL %s is under a minute", ErrInvalid, w.LabTTL)
	case !w.EndsAt.After(w.StartsAt):
		return fmt.Errorf("create workshop: %w: the end must come after the start", ErrInvalid)
	case w.Opened < 0 || w.Opened > len(w.Labs):
		return fmt.Errorf("create workshop: %w: %d labs open of %d", ErrInvalid, w.Opened, len(w.Labs))
	}
	labs, _ := json.Marshal(w.Labs)
	err := s.w.QueryRowContext(ctx, `INSERT INTO workshops (instructor_id, title, code, labs, opened, lab_ttl_s, starts_at, ends_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`, w.InstructorID, w.Title, w.Code, string(labs), w.Opened,
		int64(w.LabTTL/time.Second), toDB(w.StartsAt), toDB(w.EndsAt)).Scan(&w.ID)
	if isUnique(err) {
		return fmt.Errorf("create workshop: code %s: %w", w.Code, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create workshop: %w", userMissing(err, w.InstructorID))
	}
	return nil
}

const workshopColumns = "id, instructor_id, title, code, labs, opened, lab_ttl_s, starts_at, ends_at, ended_at"

func scanWorkshop(row scanner) (*Workshop, error) {
	var w Workshop
	var labs string
	var ttl, starts, ends int64
	var ended sql.NullInt64
	if err := row.Scan(&w.ID, &w.InstructorID, &w.Title, &w.Code, &labs, &w.Opened, &ttl, &starts, &ends, &ended); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(labs), &w.Labs); err != nil {
		return nil, fmt.Errorf("workshop %d: labs: %w", w.ID, err)
	}
	w.LabTTL, w.StartsAt, w.EndsAt = time.Duration(ttl)*time.Second, fromDB(starts), fromDB(ends)
	if ended.Valid {
		w.EndedAt = fromDB(ended.Int64)
	}
	return &w, nil
}

func (s *sqlDB) oneWorkshop(ctx context.Context, what, where string, arg any) (*Workshop, error) {
	w, err := scanWorkshop(s.r.QueryRowContext(ctx, "SELECT "+workshopColumns+" FROM workshops WHERE "+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return w, nil
}

// Workshop implements Workshops.
func (s *sqlDB) Workshop(ctx context.Context, id int64) (*Workshop, error) {
	return s.oneWorkshop(ctx, fmt.Sprintf("workshop %d", id), "id = $1", id)
}

// WorkshopByCode implements Workshops.
func (s *sqlDB) WorkshopByCode(ctx context.Context, code string) (*Workshop, error) {
	return s.oneWorkshop(ctx, "workshop by code", "code = $1", NormalizeCode(code))
}

// WorkshopsOf implements Workshops.
func (s *sqlDB) WorkshopsOf(ctx context.Context, userID int64) ([]Workshop, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+workshopColumns+` FROM workshops WHERE instructor_id = $1
		OR id IN (SELECT workshop_id FROM workshop_members WHERE user_id = $1) ORDER BY starts_at DESC, id DESC`, userID)
	if err != nil {
		return nil, fmt.Errorf("workshops of user %d: %w", userID, err)
	}
	defer rows.Close()
	var out []Workshop
	for rows.Next() {
		w, err := scanWorkshop(rows)
		if err != nil {
			return nil, fmt.Errorf("workshops of user %d: %w", userID, err)
		}
		out = append(out, *w)
	}
	return out, rows.Err()
}

// JoinWorkshop implements Workshops.
func (s *sqlDB) JoinWorkshop(ctx context.Context, workshopID, userID int64) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO workshop_members (workshop_id, user_id, joined_at) VALUES ($1, $2, $3)
		ON CONFLICT (workshop_id, user_id) DO NOTHING`, workshopID, userID, toDB(now()))
	if isForeignKey(err) {
		return fmt.Errorf("join workshop %d: user %d: %w", workshopID, userID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("join workshop %d: %w", workshopID, err)
	}
	return nil
}

// Members implements Workshops.
func (s *sqlDB) Members(ctx context.Context, workshopID int64) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT user_id FROM workshop_members WHERE workshop_id = $1 ORDER BY joined_at, user_id`, workshopID)
	if err != nil {
		return nil, fmt.Errorf("members of workshop %d: %w", workshopID, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("members of workshop %d: %w", workshopID, err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Roster implements Workshops: members joined to their names and, left joined,
// to their lab records, one row per member and lab graded (one for a member
// with none).
func (s *sqlDB) Roster(ctx context.Context, w *Workshop) ([]Member, error) {
	args, in := []any{w.ID}, []string{"NULL"} // lab_id IN (NULL) matches none
	for i, lab := range w.Labs {
		args = append(args, lab)
		in = append(in, "$"+strconv.Itoa(i+2))
	}
	rows, err := s.r.QueryContext(ctx, `SELECT m.user_id, u.name, lp.lab_id, lp.passed, lp.score, lp.attempts
		FROM workshop_members m JOIN users u ON u.id = m.user_id
		LEFT JOIN lab_progress lp ON lp.user_id = m.user_id AND lp.lab_id IN (`+strings.Join(in, ", ")+`)
		WHERE m.workshop_id = $1 ORDER BY m.joined_at, m.user_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("roster of workshop %d: %w", w.ID, err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		var lab sql.NullString
		var passed sql.NullBool
		var score sql.NullFloat64
		var attempts sql.NullInt64
		if err := rows.Scan(&m.ID, &m.Name, &lab, &passed, &score, &attempts); err != nil {
			return nil, fmt.Errorf("roster of workshop %d: %w", w.ID, err)
		}
		if n := len(out); n == 0 || out[n-1].ID != m.ID {
			out = append(out, m)
		}
		if lab.Valid {
			last := &out[len(out)-1]
			if last.Labs == nil {
				last.Labs = map[string]LabProgress{}
			}
			last.Labs[lab.String] = LabProgress{Passed: passed.Bool, Score: score.Float64, Attempts: int(attempts.Int64)}
		}
	}
	return out, rows.Err()
}

// OpenLabs implements Workshops.
func (s *sqlDB) OpenLabs(ctx context.Context, workshopID int64, n int) error {
	w, err := s.Workshop(ctx, workshopID)
	if err != nil {
		return err
	}
	if n < 0 || n > len(w.Labs) {
		return fmt.Errorf("open %d labs of workshop %d: %w: it has %d", n, workshopID, ErrInvalid, len(w.Labs))
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE workshops SET opened = $1 WHERE id = $2`, n, workshopID); err != nil {
		return fmt.Errorf("open labs of workshop %d: %w", workshopID, err)
	}
	return nil
}

// EndWorkshop implements Workshops.
func (s *sqlDB) EndWorkshop(ctx context.Context, workshopID int64) error {
	res, err := s.w.ExecContext(ctx, `UPDATE workshops SET ended_at = COALESCE(ended_at, $1) WHERE id = $2`, toDB(now()), workshopID)
	if err != nil {
		return fmt.Errorf("end workshop %d: %w", workshopID, err)
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return fmt.Errorf("end workshop %d: %w", workshopID, ErrNotFound)
	}
	return nil
}

// LogWorkshopEvent implements Workshops.
func (s *sqlDB) LogWorkshopEvent(ctx context.Context, e *WorkshopEvent) error {
	if e.Kind == "" {
		return fmt.Errorf("workshop event: %w: no kind", ErrInvalid)
	}
	e.At = now()
	var learner any
	if e.LearnerID != 0 {
		learner = e.LearnerID
	}
	err := s.w.QueryRowContext(ctx, `INSERT INTO workshop_events (workshop_id, learner_id, kind, public, secret, at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, e.WorkshopID, learner, e.Kind, e.Public, e.Secret, toDB(e.At)).Scan(&e.ID)
	if isForeignKey(err) {
		return fmt.Errorf("workshop event: workshop %d or learner %d: %w", e.WorkshopID, e.LearnerID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("workshop event: %w", err)
	}
	return nil
}

// WorkshopEvents implements Workshops.
func (s *sqlDB) WorkshopEvents(ctx context.Context, workshopID, learnerID int64) ([]WorkshopEvent, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, workshop_id, COALESCE(learner_id, 0), kind, public, secret, at FROM workshop_events
		WHERE workshop_id = $1 AND (learner_id = $2 OR learner_id IS NULL OR $2 = 0) ORDER BY id`, workshopID, learnerID)
	if err != nil {
		return nil, fmt.Errorf("events of workshop %d: %w", workshopID, err)
	}
	defer rows.Close()
	var out []WorkshopEvent
	for rows.Next() {
		var e WorkshopEvent
		var at int64
		if err := rows.Scan(&e.ID, &e.WorkshopID, &e.LearnerID, &e.Kind, &e.Public, &e.Secret, &at); err != nil {
			return nil, fmt.Errorf("events of workshop %d: %w", workshopID, err)
		}
		e.At = fromDB(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
