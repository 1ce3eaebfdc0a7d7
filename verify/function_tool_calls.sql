-- Verify runq:function_tool_calls on pg

\set function 'runq.tool_calls(bigint)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._run_not_found('
\ir lib/function.sql
