-- Verify runq:function_set_budget on pg

\set function 'runq.set_budget(bigint, jsonb)'
\set callers 'runq_admin'
\ir lib/function.sql
