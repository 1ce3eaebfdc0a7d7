-- Verify runq:function_complete on pg

\set function 'runq.complete(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
