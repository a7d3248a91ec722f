-- Certification: exam attempts (with each task's saved answer, score and the
-- commands typed), and the certificates issued for passes.

CREATE TABLE exam_attempts (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    exam_id      TEXT    NOT NULL,
    -- seed draws this attempt's tasks and variants; it never leaves the server.
    seed         BLOB    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('active', 'submitted', 'voided')),
    started_at   INTEGER NOT NULL,
    deadline_at  INTEGER NOT NULL,
    submitted_at INTEGER,
    auto         INTEGER NOT NULL DEFAULT 0 CHECK (auto IN (0, 1)), -- submitted at time-out
    score        REAL    NOT NULL DEFAULT 0 CHECK (score BETWEEN 0 AND 1),
    passed       INTEGER NOT NULL DEFAULT 0 CHECK (passed IN (0, 1)),
    void_reason  TEXT    NOT NULL DEFAULT '',
    voided_by    INTEGER REFERENCES users (id) ON DELETE SET NULL
) STRICT;

-- One active attempt per candidate, whatever the exam.
CREATE UNIQUE INDEX exam_attempts_one_active ON exam_attempts (user_id) WHERE state = 'active';
CREATE INDEX exam_attempts_exam ON exam_attempts (exam_id, started_at);

CREATE TABLE exam_tasks (
    attempt_id INTEGER NOT NULL REFERENCES exam_attempts (id) ON DELETE CASCADE,
    task       INTEGER NOT NULL CHECK (task >= 0),
    answer     TEXT    NOT NULL DEFAULT '', -- JSON, as the candidate last saved it
    saved_at   INTEGER NOT NULL DEFAULT 0,
    graded     INTEGER NOT NULL DEFAULT 0 CHECK (graded IN (0, 1)),
    score      REAL    NOT NULL DEFAULT 0 CHECK (score BETWEEN 0 AND 1),
    report     TEXT    NOT NULL DEFAULT '', -- JSON: what the score rests on
    PRIMARY KEY (attempt_id, task)
) STRICT, WITHOUT ROWID;

CREATE TABLE exam_commands (
    id         INTEGER PRIMARY KEY,
    attempt_id INTEGER NOT NULL REFERENCES exam_attempts (id) ON DELETE CASCADE,
    task       INTEGER NOT NULL,
    node       TEXT    NOT NULL,
    command    TEXT    NOT NULL,
    at         INTEGER NOT NULL
) STRICT;

CREATE INDEX exam_commands_attempt ON exam_commands (attempt_id, id);

CREATE TABLE certificates (
    id            TEXT    PRIMARY KEY,
    user_id       INTEGER REFERENCES users (id) ON DELETE SET NULL,
    attempt_id    INTEGER REFERENCES exam_attempts (id) ON DELETE SET NULL,
    document      BLOB    NOT NULL, -- the signed JSON document, byte for byte
    issued_at     INTEGER NOT NULL,
    revoked_at    INTEGER,
    revoke_reason TEXT    NOT NULL DEFAULT '',
    revoked_by    INTEGER REFERENCES users (id) ON DELETE SET NULL
) STRICT;
