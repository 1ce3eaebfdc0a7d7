-- Verify runq:function_redrive on pg

\set function 'runq.redrive(bigint, text)'
\set callers 'runq_admin'
-- This version opens a fresh deadline window.
\set body 'v_now + r.timeout'
\ir lib/function.sql
