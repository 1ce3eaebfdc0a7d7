-- Verify runq:function_sweep on pg

\set function 'runq.sweep(integer)'
\set callers 'runq_worker runq_admin'
-- This version fails runs past their deadline.
\set body 'v_late'
\ir lib/function.sql
