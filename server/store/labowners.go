package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// LabOwner is the replica that runs a lab: its sandbox lives on that replica's
// host, so the other replicas forward the lab's requests there.
type LabOwner struct {
	LabID     string
	LearnerID int64
	Replica   string // the owner's advertised base URL
	Scenario  string
	// Attempt and Task are an exam lab's attempt and task; 0 for other labs.
	Attempt   int64
	Task      int
	StartedAt time.Time
	EndedAt   time.Time // zero while the lab runs, as far as anyone knows
}

// LabOwners records which replica runs each lab. SQLite and PostgreSQL
// implement it beside Store.
type LabOwners interface {
	// ClaimLab records that o.Replica runs lab o.LabID of o.LearnerID,
	// started now, unless the learner has a lab running: then it records
	// nothing and is ErrExists. Two claims at once cannot both win. An empty
	// lab id or replica is ErrInvalid, an unknown learner ErrNotFound.
	ClaimLab(ctx context.Context, o *LabOwner) error
	// LabOwner returns a lab's owner; ErrNotFound if none is recorded.
	LabOwner(ctx context.Context, labID string) (*LabOwner, error)
	// RunningLabs lists a learner's labs not marked ended (one at most since
	// ClaimLab), oldest first.
	RunningLabs(ctx context.Context, learnerID int64) ([]LabOwner, error)
	// WorkshopLabs lists the labs not marked ended of a workshop's members
	// (any lab of theirs: the owner knows which are the workshop's), oldest first.
	WorkshopLabs(ctx context.Context, workshopID int64) ([]LabOwner, error)
	// EndLab marks a lab ended (once: the first time stays).
	EndLab(ctx context.Context, labID string) error
	// EndReplicaLabs marks every lab of a replica ended: it restarted, or is
	// gone, and its labs with it.
	EndReplicaLabs(ctx context.Context, replica string) error
	// DeleteLabOwners forgets the labs started before t and says how many.
	DeleteLabOwners(ctx context.Context, before time.Time) (int64, error)
}

var _ LabOwners = (*sqlDB)(nil)

// ClaimLab implements LabOwners: the unique index lab_owners_running (one row
// not ended per learner) makes a second claim insert nothing.
func (s *sqlDB) ClaimLab(ctx context.Context, o *LabOwner) error {
	if strings.TrimSpace(o.LabID) == "" || strings.TrimSpace(o.Replica) == "" {
		return fmt.Errorf("claim a lab: %w: a lab id and a replica are required", ErrInvalid)
	}
	o.StartedAt = now()
	res, err := s.w.ExecContext(ctx, `INSERT INTO lab_owners (lab_id, learner_id, replica, scenario, exam_attempt, exam_task, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		o.LabID, o.LearnerID, o.Replica, o.Scenario, o.Attempt, o.Task, toDB(o.StartedAt))
	if err != nil {
		return fmt.Errorf("claim lab %s: %w", o.LabID, userMissing(err, o.LearnerID))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("claim lab %s: %w", o.LabID, err)
	}
	if n == 0 {
		return fmt.Errorf("claim lab %s: user %d: %w: a lab of theirs runs", o.LabID, o.LearnerID, ErrExists)
	}
	return nil
}

const labOwnerColumns = "lab_id, learner_id, replica, scenario, exam_attempt, exam_task, started_at, ended_at"

func scanLabOwner(row scanner) (*LabOwner, error) {
	var o LabOwner
	var started int64
	var ended sql.NullInt64
	if err := row.Scan(&o.LabID, &o.LearnerID, &o.Replica, &o.Scenario, &o.Attempt, &o.Task, &started, &ended); err != nil {
		return nil, err
	}
	o.StartedAt = fromDB(started)
	if ended.Valid {
		o.EndedAt = fromDB(ended.Int64)
	}
	return &o, nil
}

// LabOwner implements LabOwners.
func (s *sqlDB) LabOwner(ctx context.Context, labID string) (*LabOwner, error) {
	o, err := scanLabOwner(s.r.QueryRowContext(ctx, "SELECT "+labOwnerColumns+" FROM lab_owners WHERE lab_id = $1", labID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("owner of lab %s: %w", labID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("owner of lab %s: %w", labID, err)
	}
	return o, nil
}

// RunningLabs implements LabOwners.
func (s *sqlDB) RunningLabs(ctx context.Context, learnerID int64) ([]LabOwner, error) {
	return s.labOwners(ctx, fmt.Sprintf("running labs of user %d", learnerID), "learner_id = $1", learnerID)
}

// WorkshopLabs implements LabOwners.
func (s *sqlDB) WorkshopLabs(ctx context.Context, workshopID int64) ([]LabOwner, error) {
	return s.labOwners(ctx, fmt.Sprintf("running labs of workshop %d", workshopID),
		"learner_id IN (SELECT user_id FROM workshop_members WHERE workshop_id = $1)", workshopID)
}

// labOwners lists the labs not marked ended that match where, oldest first.
func (s *sqlDB) labOwners(ctx context.Context, what, where string, arg any) ([]LabOwner, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+labOwnerColumns+" FROM lab_owners WHERE "+where+" AND ended_at IS NULL ORDER BY started_at, lab_id", arg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []LabOwner
	for rows.Next() {
		o, err := scanLabOwner(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, *o)
	}
	return out, rows.Err()
}

// EndLab implements LabOwners.
func (s *sqlDB) EndLab(ctx context.Context, labID string) error {
	if _, err := s.w.ExecContext(ctx, "UPDATE lab_owners SET ended_at = $1 WHERE lab_id = $2 AND ended_at IS NULL", toDB(now()), labID); err != nil {
		return fmt.Errorf("end lab %s: %w", labID, err)
	}
	return nil
}

// EndReplicaLabs implements LabOwners.
func (s *sqlDB) EndReplicaLabs(ctx context.Context, replica string) error {
	if _, err := s.w.ExecContext(ctx, "UPDATE lab_owners SET ended_at = $1 WHERE replica = $2 AND ended_at IS NULL", toDB(now()), replica); err != nil {
		return fmt.Errorf("end the labs of %s: %w", replica, err)
	}
	return nil
}

// DeleteLabOwners implements LabOwners.
func (s *sqlDB) DeleteLabOwners(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM lab_owners WHERE started_at < $1`, toDB(before))
	if err != nil {
		return 0, fmt.Errorf("delete lab owners: %w", err)
	}
	return res.RowsAffected()
}
