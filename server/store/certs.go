package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CertRecord is an issued certificate: its signed document and, once revoked,
// when, why and by whom.
type CertRecord struct {
	ID        string
	UserID    int64 // 0 when the account was deleted
	AttemptID int64 // 0 when none
	Document  []byte
	IssuedAt  time.Time
	Revoked   bool
	RevokedAt time.Time
	Reason    string
	RevokedBy int64
}

// Certs keeps issued certificates. SQLite and PostgreSQL implement it beside Store.
type Certs interface {
	// PutCertificate stores a newly issued certificate; ErrExists if its id is taken.
	PutCertificate(ctx context.Context, r *CertRecord) error
	// Certificate returns one; ErrNotFound if no such id.
	Certificate(ctx context.Context, id string) (*CertRecord, error)
	// RevokeCertificate revokes one for reason (required, ErrInvalid); revoking
	// twice keeps the first revocation. ErrNotFound if no such id.
	RevokeCertificate(ctx context.Context, id string, by int64, reason string) error
	// Revoked lists every revoked certificate, oldest revocation first.
	Revoked(ctx context.Context) ([]CertRecord, error)
	// UserCertificates lists a user's certificates, newest first.
	UserCertificates(ctx context.Context, userID int64) ([]CertRecord, error)
}

var _ Certs = (*sqlDB)(nil)

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// PutCertificate implements Certs.
func (s *sqlDB) PutCertificate(ctx context.Context, r *CertRecord) error {
	if r.ID == "" || len(r.Document) == 0 {
		return fmt.Errorf("put certificate: %w: empty id or document", ErrInvalid)
	}
	r.IssuedAt = now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO certificates (id, user_id, attempt_id, document, issued_at) VALUES ($1, $2, $3, $4, $5)`,
		r.ID, nullID(r.UserID), nullID(r.AttemptID), r.Document, toDB(r.IssuedAt))
	if isUnique(err) {
		return fmt.Errorf("put certificate %s: %w", r.ID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("put certificate %s: %w", r.ID, err)
	}
	return nil
}

const certColumns = "id, COALESCE(user_id, 0), COALESCE(attempt_id, 0), document, issued_at, revoked_at, revoke_reason, COALESCE(revoked_by, 0)"

func scanCert(row scanner) (*CertRecord, error) {
	var r CertRecord
	var issued int64
	var revoked sql.NullInt64
	if err := row.Scan(&r.ID, &r.UserID, &r.AttemptID, &r.Document, &issued, &revoked, &r.Reason, &r.RevokedBy); err != nil {
		return nil, err
	}
	r.IssuedAt = fromDB(issued)
	if revoked.Valid {
		r.Revoked, r.RevokedAt = true, fromDB(revoked.Int64)
	}
	return &r, nil
}

// Certificate implements Certs.
func (s *sqlDB) Certificate(ctx context.Context, id string) (*CertRecord, error) {
	r, err := scanCert(s.r.QueryRowContext(ctx, "SELECT "+certColumns+" FROM certificates WHERE id = $1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("certificate %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", id, err)
	}
	return r, nil
}

// RevokeCertificate implements Certs.
func (s *sqlDB) RevokeCertificate(ctx context.Context, id string, by int64, reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fmt.Errorf("revoke certificate %s: %w: a reason is required", id, ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE certificates SET revoked_at = COALESCE(revoked_at, $1),
		revoke_reason = CASE WHEN revoked_at IS NULL THEN $2 ELSE revoke_reason END,
		revoked_by = CASE WHEN revoked_at IS NULL THEN $3 ELSE revoked_by END WHERE id = $4`,
		toDB(now()), reason, nullID(by), id)
	if err != nil {
		return fmt.Errorf("revoke certificate %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("revoke certificate %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *sqlDB) listCerts(ctx context.Context, what, where string, args ...any) ([]CertRecord, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+certColumns+" FROM certificates "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []CertRecord
	for rows.Next() {
		r, err := scanCert(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Revoked implements Certs.
func (s *sqlDB) Revoked(ctx context.Context) ([]CertRecord, error) {
	return s.listCerts(ctx, "revoked certificates", "WHERE revoked_at IS NOT NULL ORDER BY revoked_at, id")
}

// UserCertificates implements Certs.
func (s *sqlDB) UserCertificates(ctx context.Context, userID int64) ([]CertRecord, error) {
	return s.listCerts(ctx, "user certificates", "WHERE user_id = $1 ORDER BY issued_at DESC", userID)
}
