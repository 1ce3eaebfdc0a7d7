-- Verify runq:wake_idle on pg

\set function 'runq._wake_lock(); runq._mark_idle()'
\set callers ''
\ir lib/function.sql

-- The trigger function is SECURITY DEFINER (deploy/wake_idle.sql says why).
\set function 'runq._wake_idle()'
\set callers ''
\set definer true
\ir lib/function.sql

BEGIN;

SELECT pg_catalog.pg_sequence_last_value('runq.idle_mark');

ROLLBACK;
