-- Workshops: an instructor's cohort working a list of labs in order, the
-- learners who joined it by code, and the journal of what happened in it
-- (labs opened, faults added, messages, TTL extended, the end).

CREATE TABLE workshops (
    id            INTEGER PRIMARY KEY,
    instructor_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title         TEXT    NOT NULL,
    code          TEXT    NOT NULL UNIQUE,
    labs          TEXT    NOT NULL, -- JSON array of scenario ids, in order
    opened        INTEGER NOT NULL DEFAULT 0 CHECK (opened >= 0), -- labs open so far, from the first
    lab_ttl_s     INTEGER NOT NULL CHECK (lab_ttl_s > 0),
    starts_at     INTEGER NOT NULL,
    ends_at       INTEGER NOT NULL,
    ended_at      INTEGER
) STRICT;

CREATE TABLE workshop_members (
    workshop_id INTEGER NOT NULL REFERENCES workshops (id) ON DELETE CASCADE,
    user_id     INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    joined_at   INTEGER NOT NULL,
    PRIMARY KEY (workshop_id, user_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE workshop_events (
    id          INTEGER PRIMARY KEY,
    workshop_id INTEGER NOT NULL REFERENCES workshops (id) ON DELETE CASCADE,
    -- learner_id is the one learner an event concerns; NULL for everyone.
    learner_id  INTEGER REFERENCES users (id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL,
    -- public is what the learners' timeline shows; secret (the fault injected)
    -- is for the instructor and the debrief only.
    public      TEXT    NOT NULL DEFAULT '',
    secret      TEXT    NOT NULL DEFAULT '',
    at          INTEGER NOT NULL
) STRICT;

CREATE INDEX workshop_events_workshop ON workshop_events (workshop_id, id);
