-- Verify runq:function_fail on pg

\set function 'runq.fail(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
