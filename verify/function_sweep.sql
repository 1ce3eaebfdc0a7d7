-- Verify runq:function_sweep on pg

\set function 'runq.sweep(integer)'
\set callers 'runq_worker runq_admin'
-- This version ends with the admissions' backstop.
\set body 'runq._rebalance('
\ir lib/function.sql
