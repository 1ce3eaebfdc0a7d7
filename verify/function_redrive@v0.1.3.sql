-- Verify runq:function_redrive on pg

\set function 'runq.redrive(bigint, text)'
\set callers 'runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._run_not_found('
\ir lib/function.sql
