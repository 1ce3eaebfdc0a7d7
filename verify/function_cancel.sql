-- Verify runq:function_cancel on pg

\set function 'runq.cancel(bigint, text)'
\set callers 'runq_client runq_admin'
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
