-- Verify runq:function_dead_letter on pg

\set function 'runq.dead_letter(integer)'
\set callers 'runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_count('
\ir lib/function.sql
