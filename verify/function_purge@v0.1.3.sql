-- Verify runq:function_purge on pg

\set function 'runq.purge(interval, integer, boolean)'
\set callers 'runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_count('
\ir lib/function.sql
