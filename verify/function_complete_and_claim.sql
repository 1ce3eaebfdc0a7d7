-- Verify runq:function_complete_and_claim on pg

\set function 'runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean)'
\set callers 'runq_worker runq_admin'
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
