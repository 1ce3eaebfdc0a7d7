-- Verify runq:function_begin_tool on pg

\set function 'runq.begin_tool(bigint, bigint, text, text, text, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_identifier('
\ir lib/function.sql
