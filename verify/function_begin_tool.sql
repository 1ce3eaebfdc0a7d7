-- Verify runq:function_begin_tool on pg

\set function 'runq.begin_tool(bigint, bigint, text, text, text, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version fails a run past its deadline.
\set body 'r.deadline > v_now'
\ir lib/function.sql
