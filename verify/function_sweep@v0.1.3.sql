-- Verify runq:function_sweep on pg

\set function 'runq.sweep(integer)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_count('
\ir lib/function.sql
