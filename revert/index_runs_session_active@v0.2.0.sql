-- Revert runq:index_runs_session_active from pg

BEGIN;

DROP INDEX runq.runs_session_active_key;

COMMIT;
