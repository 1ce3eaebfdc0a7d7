-- Deploy runq:table_model_calls to pg
-- requires: table_runs
-- requires: domain_epoch
-- Locks: none on existing tables (a new table; its foreign key takes SHARE
-- ROW EXCLUSIVE on runq.runs for an instant, and scans nothing: the new
-- table is empty).

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The journal of a run's model requests (runq.record_model_call): request
-- seq of the run as sent under an epoch, a hash of the request, the
-- response and what it cost. A resumed attempt replays the responses whose
-- writer held the run (applied) instead of paying for them again. One row
-- per request, not a checkpoint per request: a checkpoint holds the whole
-- conversation, so a 100-request run would write the history 100 times.
-- A stale worker's rows are kept (applied false): what it spent is a fact.
-- Written once per model request, so the foreign key's lookup costs nothing
-- that matters, and runq.purge deletes the rows through its cascade.
CREATE TABLE runq.model_calls (
    run_id       bigint      NOT NULL REFERENCES runq.runs (run_id) ON DELETE CASCADE,
    seq          bigint      NOT NULL CHECK (seq >= 1),
    epoch        runq.epoch  NOT NULL,
    applied      boolean     NOT NULL,
    created_at   timestamptz NOT NULL,
    request_hash text        NOT NULL CHECK (request_hash <> '' AND length(request_hash) <= 256),
    response     jsonb       NOT NULL,
    usage        jsonb,
    PRIMARY KEY (run_id, seq, epoch)
);

-- Replay is unambiguous by construction: a request is applied under one
-- epoch at most (record_model_call locks the run, so its writer held it at
-- commit; a later epoch replays that row instead of sending the request).
CREATE UNIQUE INDEX model_calls_applied_key ON runq.model_calls (run_id, seq) WHERE applied;

COMMENT ON TABLE runq.model_calls IS
    'The journal of runs'' model requests (runq.record_model_call): request seq of a run under an epoch, its hash, response and usage; applied when its writer held the run, so a resumed attempt replays it.';

COMMIT;
