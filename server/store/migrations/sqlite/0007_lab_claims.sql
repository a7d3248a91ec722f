-- One running lab per learner across replicas, held by the database: a
-- replica claims a learner's lab (a row not ended) before it builds the
-- sandbox, and a second claim while one runs inserts nothing. The row also
-- says what the lab is, so that another replica can link to it: its scenario,
-- and for an exam's lab the attempt and task (0 and 0 otherwise).

ALTER TABLE lab_owners ADD COLUMN scenario TEXT NOT NULL DEFAULT '';
ALTER TABLE lab_owners ADD COLUMN exam_attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lab_owners ADD COLUMN exam_task INTEGER NOT NULL DEFAULT 0;

-- A learner with several labs taken for running (the race this migration
-- closes) keeps the newest; the older ones end when they started, the time
-- known of them.
UPDATE lab_owners SET ended_at = started_at
WHERE ended_at IS NULL AND EXISTS (
    SELECT 1 FROM lab_owners n
    WHERE n.learner_id = lab_owners.learner_id AND n.ended_at IS NULL
      AND (n.started_at > lab_owners.started_at OR (n.started_at = lab_owners.started_at AND n.lab_id > lab_owners.lab_id)));

CREATE UNIQUE INDEX lab_owners_running ON lab_owners (learner_id) WHERE ended_at IS NULL;
