// Package store keeps commlab's durable state: accounts and roles, login
// sessions, and each learner's progress through the course. Callers use the
// Store interface; SQLite (one file, the default) and PostgreSQL (a server,
// for workshops and several commlab replicas) implement it, with the same
// queries through a dialect. Every implementation must pass the conformance
// suite in store/storetest.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors, usable with errors.Is on anything a Store returns.
var (
	// ErrNotFound: no such user, or the session is unknown or expired.
	ErrNotFound = errors.New("not found")
	// ErrExists: a user with that email (compared case-insensitively) exists.
	ErrExists = errors.New("already exists")
	// ErrInvalid: an argument was rejected before reaching the database.
	ErrInvalid = errors.New("invalid argument")
	// ErrSchemaTooNew: the database was migrated by a newer commlab.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
)

// Role is what an account may do.
type Role string

// The roles, from least to most privileged.
const (
	RoleLearner    Role = "learner"
	RoleInstructor Role = "instructor"
	RoleAdmin      Role = "admin"
)

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool {
	switch r {
	case RoleLearner, RoleInstructor, RoleAdmin:
		return true
	}
	return false
}

// User is an account. Email is stored as given; uniqueness and lookups
// ignore case. PasswordHash is opaque to the store (auth encodes it).
type User struct {
	ID           int64
	Email        string
	Name         string
	Role         Role
	PasswordHash string
	CreatedAt    time.Time
}

// Progress is one learner's state in one chapter. Scores are fractions in
// [0, 1]; the store keeps the best one seen, and a pass, once recorded, stays.
// LabPassed, LabScore and LabAttempts sum up every lab of the chapter (some lab
// passed, best score, attempts in all); Labs has each lab's own result.
type Progress struct {
	ChapterID   string
	Read        bool
	QuizPassed  bool
	QuizScore   float64
	QuizAnswers Answers // the latest quiz submission; nil when none
	LabPassed   bool
	LabScore    float64
	LabAttempts int
	Labs        map[string]LabProgress // by lab (scenario) ID; nil when none
	UpdatedAt   time.Time
}

// Answers are a quiz submission: the values given per question ID.
type Answers map[string][]string

// LabProgress is one learner's record in one lab: best score, a pass that
// sticks, and how many attempts were graded.
type LabProgress struct {
	Passed   bool
	Score    float64
	Attempts int
}

// Store is the persistence contract the server relies on. All methods are
// safe for concurrent use, honour ctx, and wrap errors with context; test
// them with errors.Is against the sentinels above.
type Store interface {
	// CreateUser inserts u and sets u.ID and u.CreatedAt. u.Role must be
	// valid and u.Email non-empty (ErrInvalid). An email already present,
	// compared case-insensitively, gives ErrExists.
	CreateUser(ctx context.Context, u *User) error
	// UserByEmail finds a user by email, ignoring case; ErrNotFound if none.
	UserByEmail(ctx context.Context, email string) (*User, error)
	// UserByID finds a user by ID; ErrNotFound if none.
	UserByID(ctx context.Context, id int64) (*User, error)
	// ListUsers returns every user, oldest first.
	ListUsers(ctx context.Context) ([]User, error)
	// SetRole changes a user's role; ErrNotFound if no such user.
	SetRole(ctx context.Context, userID int64, r Role) error
	// SetPasswordHash replaces a user's password hash (after a password
	// change, or to upgrade hashing parameters); ErrNotFound if no such user.
	SetPasswordHash(ctx context.Context, userID int64, hash string) error
	// CountUsers returns the number of accounts.
	CountUsers(ctx context.Context) (int, error)

	// CreateSession starts a login session for userID that lasts ttl and
	// returns its token: 32 random bytes, base64url without padding. Only
	// the token's SHA-256 is stored. ErrNotFound if no such user.
	CreateSession(ctx context.Context, userID int64, ttl time.Duration) (token string, err error)
	// SessionUser returns the user a token belongs to; ErrNotFound if the
	// token is unknown or expired.
	SessionUser(ctx context.Context, token string) (*User, error)
	// DeleteSession ends a session. Deleting an unknown token is not an
	// error, so logging out twice is harmless.
	DeleteSession(ctx context.Context, token string) error
	// DeleteUserSessions ends every session of a user (password change,
	// role revoked) and returns how many there were.
	DeleteUserSessions(ctx context.Context, userID int64) (int64, error)
	// DeleteExpiredSessions removes expired sessions and returns how many.
	DeleteExpiredSessions(ctx context.Context) (int64, error)

	// MarkRead records that the user read a chapter.
	MarkRead(ctx context.Context, userID int64, chapterID string) error
	// RecordQuiz records a quiz result: the best score is kept, a pass
	// sticks, and answers replace the previous submission's. score must be in
	// [0, 1] (ErrInvalid).
	RecordQuiz(ctx context.Context, userID int64, chapterID string, score float64, passed bool, answers Answers) error
	// RecordLab records an attempt at lab labID of chapterID, for the lab and
	// for the chapter's summary: attempts grow by one, the best score is kept
	// and a pass sticks. score must be in [0, 1] (ErrInvalid).
	RecordLab(ctx context.Context, userID int64, chapterID, labID string, score float64, passed bool) error
	// Progress returns the user's progress by chapter ID (empty, not nil,
	// when there is none).
	Progress(ctx context.Context, userID int64) (map[string]Progress, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the database. The Store must not be used afterwards.
	Close() error
}
