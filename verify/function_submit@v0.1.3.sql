-- Verify runq:function_submit on pg

\set function 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval)'
\set callers 'runq_client runq_admin'
-- The reworked submit, not v0.1.0's: it takes a purged key again.
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_identifier('
\ir lib/function.sql
