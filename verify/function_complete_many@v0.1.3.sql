-- Verify runq:function_complete_many on pg

\set function 'runq.complete_many(bigint[], bigint[], jsonb[])'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
