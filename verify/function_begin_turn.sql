-- Verify runq:function_begin_turn on pg

\set function 'runq.begin_turn(bigint, bigint)'
\set callers 'runq_worker runq_admin'
-- This version reads every ancestor's budget.
\set body 'runq._ancestor_overrun('
\ir lib/function.sql
