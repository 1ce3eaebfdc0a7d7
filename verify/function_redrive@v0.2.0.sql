-- Verify runq:function_redrive on pg

\set function 'runq.redrive(bigint, text)'
\set callers 'runq_admin'
-- This version opens a fresh deadline window, and names a schedule's live run.
\set body 'runs_schedule_active_key'
\ir lib/function.sql
