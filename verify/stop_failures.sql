-- Verify runq:stop_failures on pg

\set function 'runq._is_reached(jsonb, jsonb); runq._budget_overrun(bigint, jsonb); runq._ancestor_overrun(bigint); runq._stop_failure(runq.runs, boolean, timestamptz)'
\set callers ''
\ir lib/function.sql
