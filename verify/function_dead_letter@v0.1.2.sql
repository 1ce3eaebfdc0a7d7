-- Verify runq:function_dead_letter on pg

\set function 'runq.dead_letter(integer)'
\set callers 'runq_admin'
\ir lib/function.sql
