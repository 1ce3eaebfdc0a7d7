-- Verify runq:function_fail on pg

\set function 'runq.fail(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
