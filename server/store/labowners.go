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
}

// LabOwners records which replica runs each lab. SQLite and PostgreSQL
// implement it beside Store.
type LabOwners interface {
	// SetLabOwner records that o.Replica runs lab o.LabID of o.LearnerID,
	// started now; a lab id given again takes the new owner. An empty lab id
	// or replica is ErrInvalid, an unknown learner ErrNotFound.
	SetLabOwner(ctx context.Context, o *LabOwner) error
	// LabOwner returns a lab's owner; ErrNotFound if none is recorded.
	LabOwner(ctx context.Context, labID string) (*LabOwner, error)
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
		ON CONFLICT (lab_id) DO UPDATE SET learner_id = excluded.learner_id, replica = excluded.replica, started_at = excluded.started_at`,
		o.LabID, o.LearnerID, o.Replica, toDB(o.StartedAt))
	if err != nil {
		return fmt.Errorf("set owner of lab %s: %w", o.LabID, userMissing(err, o.LearnerID))
	}
	return nil
}

// LabOwner implements LabOwners.
func (s *sqlDB) LabOwner(ctx context.Context, labID string) (*LabOwner, error) {
	o := LabOwner{LabID: labID}
	var started int64
	err := s.r.QueryRowContext(ctx, `SELECT learner_id, replica, started_at FROM lab_owners WHERE lab_id = $1`, labID).
		Scan(&o.LearnerID, &o.Replica, &started)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("owner of lab %s: %w", labID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("owner of lab %s: %w", labID, err)
	}
	o.StartedAt = fromDB(started)
	return &o, nil
}

// DeleteLabOwners implements LabOwners.
func (s *sqlDB) DeleteLabOwners(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM lab_owners WHERE started_at < $1`, toDB(before))
	if err != nil {
		return 0, fmt.Errorf("delete lab owners: %w", err)
	}
	return res.RowsAffected()
}
