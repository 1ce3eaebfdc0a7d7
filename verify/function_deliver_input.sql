-- Verify runq:function_deliver_input on pg

\set function 'runq.deliver_input(bigint, jsonb)'
\set callers 'runq_client runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._run_not_found('
\ir lib/function.sql
