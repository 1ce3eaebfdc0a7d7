-- Deploy runq:index_runs_session_active to pg
-- requires: table_runs

BEGIN;

-- One non-terminal run per (tenant_id, session_id): the rule lives in the
-- schema, not in code. waiting_for_user holds the slot too; a submit to such a
-- session delivers input instead of creating a second run. Sessionless runs
-- (maintenance) never conflict and take no entry here.
CREATE UNIQUE INDEX runs_session_active_key ON runq.runs (tenant_id, session_id)
    WHERE status IN ('queued', 'running', 'waiting_for_user') AND session_id IS NOT NULL;

COMMIT;
