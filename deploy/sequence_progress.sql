-- Deploy runq:sequence_progress to pg
-- requires: schema_runq

BEGIN;

-- Orders checkpoints and delivered inputs against each other: a claim returns
-- the newest checkpoint and the inputs delivered after it, which needs one
-- order across both tables.
CREATE SEQUENCE runq.progress_seq AS bigint;

COMMENT ON SEQUENCE runq.progress_seq IS
    'Shared order of runq.checkpoints and runq.inputs.';

COMMIT;
