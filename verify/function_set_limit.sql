-- Verify runq:function_set_limit on pg

\set function 'runq.set_limit(text, text, integer)'
\set callers 'runq_admin'
\ir lib/function.sql
