-- Verify runq:function_ask_user on pg

\set function 'runq.ask_user(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
