-- Verify runq:function_create_schedule on pg

\set function 'runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval)'
\set callers 'runq_admin'
\ir lib/function.sql
