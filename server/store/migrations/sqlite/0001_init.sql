-- Accounts, login sessions and per-chapter progress.
-- Times are INTEGER microseconds since the Unix epoch, UTC.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    email         TEXT    NOT NULL,
    -- email_key is the lower-cased email; it makes uniqueness and lookups
    -- case-insensitive for all of Unicode, which COLLATE NOCASE is not.
    email_key     TEXT    NOT NULL UNIQUE,
    name          TEXT    NOT NULL,
    role          TEXT    NOT NULL CHECK (role IN ('learner', 'instructor', 'admin')),
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
    token_hash BLOB    PRIMARY KEY, -- SHA-256 of the token; the token itself is never stored
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_user_id ON sessions (user_id);

CREATE TABLE progress (
    user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chapter_id   TEXT    NOT NULL,
    is_read      INTEGER NOT NULL DEFAULT 0 CHECK (is_read IN (0, 1)),
    quiz_passed  INTEGER NOT NULL DEFAULT 0 CHECK (quiz_passed IN (0, 1)),
    quiz_score   REAL    NOT NULL DEFAULT 0 CHECK (quiz_score BETWEEN 0 AND 1),
    lab_passed   INTEGER NOT NULL DEFAULT 0 CHECK (lab_passed IN (0, 1)),
    lab_score    REAL    NOT NULL DEFAULT 0 CHECK (lab_score BETWEEN 0 AND 1),
    lab_attempts INTEGER NOT NULL DEFAULT 0 CHECK (lab_attempts >= 0),
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (user_id, chapter_id)
) STRICT, WITHOUT ROWID;
