-- Verify runq:function_tick on pg

\set function 'runq.tick(integer)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
