-- Verify runq:function_submit on pg

\set function 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
