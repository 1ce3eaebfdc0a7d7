-- Verify runq:function_redrive on pg

\set function 'runq.redrive(bigint, text)'
\set callers 'runq_admin'
-- This version refuses a child of a terminal parent.
\set body 'v_parent'
\ir lib/function.sql
