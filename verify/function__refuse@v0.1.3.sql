-- Verify runq:function__refuse on pg

\set function 'runq._refuse(bigint, bigint, text, boolean)'
\set callers ''
-- The rework that answers epochs the run never had.
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._run_not_found('
\ir lib/function.sql
