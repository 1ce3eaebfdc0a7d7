-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer, text[])'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_classes('
\ir lib/function.sql
