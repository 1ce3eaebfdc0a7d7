-- Verify runq:function_begin_tool on pg

\set function 'runq.begin_tool(bigint, bigint, text, text, text, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
