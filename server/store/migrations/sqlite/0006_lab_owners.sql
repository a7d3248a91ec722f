-- Which replica runs each lab: a lab's sandbox lives on the host of the
-- replica that started it, so the others forward its requests there. A row
-- is kept a day (DeleteLabOwners), longer than any lab lasts.

CREATE TABLE lab_owners (
    lab_id     TEXT    PRIMARY KEY,
    learner_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    replica    TEXT    NOT NULL, -- the owner's advertised URL (serve --advertise)
    started_at INTEGER NOT NULL,
    ended_at   INTEGER -- NULL while the lab runs, as far as anyone knows
) STRICT, WITHOUT ROWID;

CREATE INDEX lab_owners_started ON lab_owners (started_at);
CREATE INDEX lab_owners_learner ON lab_owners (learner_id);
