-- Verify runq:function_get_run on pg

\set function 'runq.get_run(bigint)'
\set callers 'runq_client runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._run_not_found('
\ir lib/function.sql
