-- Verify runq:function_record_usage on pg

\set function 'runq.record_usage(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
