-- The learner's latest quiz answers (so a reopened chapter shows them with their
-- verdicts), and lab results per lab: a chapter may have several labs (ch08 has four),
-- and passing one must not count for the others.

ALTER TABLE progress ADD COLUMN quiz_answers TEXT NOT NULL DEFAULT '';

CREATE TABLE lab_progress (
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    lab_id     TEXT    NOT NULL,
    chapter_id TEXT    NOT NULL,
    passed     INTEGER NOT NULL DEFAULT 0 CHECK (passed IN (0, 1)),
    score      REAL    NOT NULL DEFAULT 0 CHECK (score BETWEEN 0 AND 1),
    attempts   INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, lab_id)
) STRICT, WITHOUT ROWID;
