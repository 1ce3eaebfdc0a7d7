-- Verify runq:function_checkpoint on pg

\set function 'runq.checkpoint(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_jsonb('
\ir lib/function.sql
