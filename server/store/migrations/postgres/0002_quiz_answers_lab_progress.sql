-- The learner's latest quiz answers, and lab results per lab: the PostgreSQL
-- twin of ../sqlite/0002_quiz_answers_lab_progress.sql.

ALTER TABLE progress ADD COLUMN quiz_answers TEXT NOT NULL DEFAULT '';

CREATE TABLE lab_progress (
    user_id    BIGINT           NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    lab_id     TEXT             NOT NULL,
    chapter_id TEXT             NOT NULL,
    passed     BOOLEAN          NOT NULL DEFAULT FALSE,
    score      DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (score BETWEEN 0 AND 1),
    attempts   INTEGER          NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    updated_at BIGINT           NOT NULL,
    PRIMARY KEY (user_id, lab_id)
);
