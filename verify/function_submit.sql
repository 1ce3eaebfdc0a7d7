-- Verify runq:function_submit on pg

\set function 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval, jsonb, interval)'
\set callers 'runq_client runq_admin'
-- This version counts a run waiting for its children as the session's.
\set body 'waiting_for_children'
\ir lib/function.sql
