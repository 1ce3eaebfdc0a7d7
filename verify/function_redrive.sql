-- Verify runq:function_redrive on pg

\set function 'runq.redrive(bigint, text)'
\set callers 'runq_admin'
-- This version calls the admission functions (limits and pauses).
\set body 'runq._requeued('
\ir lib/function.sql
