-- Verify runq:function_complete_many on pg

\set function 'runq.complete_many(bigint[], bigint[], jsonb[])'
\set callers 'runq_worker runq_admin'
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
