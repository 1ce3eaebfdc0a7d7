-- Verify runq:function_drop_schedule on pg

\set function 'runq.drop_schedule(text)'
\set callers 'runq_admin'
\ir lib/function.sql
