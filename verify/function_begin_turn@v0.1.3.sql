-- Verify runq:function_begin_turn on pg

\set function 'runq.begin_turn(bigint, bigint)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
