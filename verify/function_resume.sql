-- Verify runq:function_resume on pg

\set function 'runq.resume(text, text)'
\set callers 'runq_admin'
\ir lib/function.sql
