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
	StartedAt time.Time
	EndedAt   time.Time // zero while the lab runs, as far as anyone knows
}

// LabOwners records which replica runs each lab. SQLite and PostgreSQL
// implement it beside Store.
type LabOwners interface {
	// SetLabOwner records that o.Replica runs lab o.LabID of o.LearnerID,
	// started now and running; a lab id given again takes the new owner. An empty lab id
	// or replica is ErrInvalid, an unknown learner ErrNotFound.
	SetLabOwner(ctx context.Context, o *LabOwner) error
	// LabOwner returns a lab's owner; ErrNotFound if none is recorded.
	LabOwner(ctx context.Context, labID string) (*LabOwner, error)
	// RunningLabs lists a learner's labs not marked ended, oldest first.
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

// SetLabOwner implements LabOwners.
func (s *sqlDB) SetLabOwner(ctx context.Context, o *LabOwner) error {
	if strings.TrimSpace(o.LabID) == "" || strings.TrimSpace(o.Replica) == "" {
		return fmt.Errorf("set lab owner: %w: a lab id and a replica are required", ErrInvalid)
	}
	o.StartedAt = now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO lab_owners (lab_id, learner_id, replica, started_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (lab_id) DO UPDATE SET learner_id = excluded.learner_id, replica = excluded.replica, started_at = excluded.started_at, ended_at = NULL`,
		o.LabID, o.LearnerID, o.Replica, toDB(o.StartedAt))
	if err != nil {
		return fmt.Errorf("set owner of lab %s: %w", o.LabID, userMissing(err, o.LearnerID))
	}
	return nil
}

const labOwnerColumns = "lab_id, learner_id, replica, started_at, ended_at"

func scanLabOwner(row scanner) (*LabOwner, error) {
	var o LabOwner
	var started int64
	var ended sql.NullInt64
	if err := row.Scan(&o.LabID, &o.LearnerID, &o.Replica, &started, &ended); err != nil {
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
