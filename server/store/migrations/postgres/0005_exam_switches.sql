-- Whether an exam takes new attempts: an admin's switch, with who set it,
-- when, and the note candidates see. An exam without a row is enabled.

CREATE TABLE exam_switches (
    exam_id    TEXT    PRIMARY KEY,
    disabled   BOOLEAN NOT NULL,
    note       TEXT    NOT NULL DEFAULT '', -- shown to candidates while disabled
    changed_by BIGINT  REFERENCES users (id) ON DELETE SET NULL,
    changed_at BIGINT  NOT NULL
);
