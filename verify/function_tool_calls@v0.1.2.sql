-- Verify runq:function_tool_calls on pg

\set function 'runq.tool_calls(bigint)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
