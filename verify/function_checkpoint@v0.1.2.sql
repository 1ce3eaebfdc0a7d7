-- Verify runq:function_checkpoint on pg

\set function 'runq.checkpoint(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
