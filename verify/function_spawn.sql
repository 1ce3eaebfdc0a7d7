-- Verify runq:function_spawn on pg

\set function 'runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
