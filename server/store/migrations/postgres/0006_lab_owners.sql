-- Which replica runs each lab; the PostgreSQL twin of
-- ../sqlite/0006_lab_owners.sql.

CREATE TABLE lab_owners (
    lab_id     TEXT   PRIMARY KEY,
    learner_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    replica    TEXT   NOT NULL, -- the owner's advertised URL (serve --advertise)
    started_at BIGINT NOT NULL,
    ended_at   BIGINT -- NULL while the lab runs, as far as anyone knows
);

CREATE INDEX lab_owners_started ON lab_owners (started_at);
CREATE INDEX lab_owners_learner ON lab_owners (learner_id);
