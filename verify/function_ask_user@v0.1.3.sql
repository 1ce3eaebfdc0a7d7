-- Verify runq:function_ask_user on pg

\set function 'runq.ask_user(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version checks its arguments with the shared checks of argument_checks.
\set body 'runq._check_jsonb('
\ir lib/function.sql
