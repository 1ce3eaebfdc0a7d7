-- Verify runq:function_heartbeat on pg

\set function 'runq.heartbeat(bigint, bigint)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
