-- Verify runq:function_begin_turn on pg

\set function 'runq.begin_turn(bigint, bigint)'
\set callers 'runq_worker runq_admin'
-- This version fails a run past its deadline and gates on the budget.
\set body 'runq._is_reached('
\ir lib/function.sql
