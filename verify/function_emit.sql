-- Verify runq:function_emit on pg

\set function 'runq.emit(bigint, bigint, jsonb[])'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
