-- One running lab per learner across replicas; the PostgreSQL twin of
-- ../sqlite/0007_lab_claims.sql.

ALTER TABLE lab_owners ADD COLUMN scenario TEXT NOT NULL DEFAULT '';
ALTER TABLE lab_owners ADD COLUMN exam_attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lab_owners ADD COLUMN exam_task INTEGER NOT NULL DEFAULT 0;

UPDATE lab_owners SET ended_at = started_at
WHERE ended_at IS NULL AND EXISTS (
    SELECT 1 FROM lab_owners n
    WHERE n.learner_id = lab_owners.learner_id AND n.ended_at IS NULL
      AND (n.started_at > lab_owners.started_at OR (n.started_at = lab_owners.started_at AND n.lab_id > lab_owners.lab_id)));

CREATE UNIQUE INDEX lab_owners_running ON lab_owners (learner_id) WHERE ended_at IS NULL;
