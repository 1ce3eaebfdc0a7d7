-- Deploy runq:check_runs_shape_validated to pg
-- requires: check_runs_shape

BEGIN;

SET LOCAL lock_timeout = '2s';
-- VALIDATE scans runq.runs under SHARE UPDATE EXCLUSIVE: writers go on, only
-- DDL and VACUUM wait. The timeout bounds that scan on a very large table.
SET LOCAL statement_timeout = '30min';

-- Every existing row passes: the five CHECKs dropped below hold on it.
ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_shape_consistent;

-- No guarantee is lost with these five: runs_shape_consistent, validated
-- above, checks the same invariants (runq.consistent_run_shape carries them
-- under the same names), at a fraction of their cost per UPDATE.
ALTER TABLE runq.runs
    -- kept by runs_shape_consistent
    -- squawk-ignore ban-drop-constraint
    DROP CONSTRAINT runs_leased_iff_running,
    -- kept by runs_shape_consistent
    -- squawk-ignore ban-drop-constraint
    DROP CONSTRAINT runs_finished_iff_terminal,
    -- kept by runs_shape_consistent
    -- squawk-ignore ban-drop-constraint
    DROP CONSTRAINT runs_failure_iff_failed,
    -- kept by runs_shape_consistent
    -- squawk-ignore ban-drop-constraint
    DROP CONSTRAINT runs_question_iff_waiting,
    -- kept by runs_shape_consistent
    -- squawk-ignore ban-drop-constraint
    DROP CONSTRAINT runs_expires_with_ttl;

COMMIT;
