-- Verify runq:function_end_tool on pg

\set function 'runq.end_tool(bigint, bigint, text, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
