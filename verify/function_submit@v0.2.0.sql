-- Verify runq:function_submit on pg

\set function 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval, jsonb, interval)'
\set callers 'runq_client runq_admin'
-- This version takes budget and timeout.
\set body 'submit.budget, submit.timeout'
\ir lib/function.sql
