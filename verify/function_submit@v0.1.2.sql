-- Verify runq:function_submit on pg

\set function 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval)'
\set callers 'runq_client runq_admin'
-- The reworked submit, not v0.1.0's: it takes a purged key again.
\set body 'EXIT WHEN FOUND'
\ir lib/function.sql
