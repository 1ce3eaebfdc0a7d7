-- Verify runq:function_pause on pg

\set function 'runq.pause(text, text, text)'
\set callers 'runq_admin'
\ir lib/function.sql
