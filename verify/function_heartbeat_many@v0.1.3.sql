-- Verify runq:function_heartbeat_many on pg

\set function 'runq.heartbeat_many(bigint[], bigint[])'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
