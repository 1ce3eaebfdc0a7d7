-- Verify runq:function_cancel on pg

\set function 'runq.cancel(bigint, text)'
\set callers 'runq_client runq_admin'
-- This version calls the admission functions (limits and pauses).
\set body 'runq._slot_left('
\ir lib/function.sql
