-- Verify runq:function_end_tool on pg

\set function 'runq.end_tool(bigint, bigint, text, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_jsonb('
\ir lib/function.sql
