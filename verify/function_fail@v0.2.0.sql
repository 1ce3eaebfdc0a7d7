-- Verify runq:function_fail on pg

\set function 'runq.fail(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version calls the admission functions (limits and pauses).
\set body 'runq._slot_left('
\ir lib/function.sql
