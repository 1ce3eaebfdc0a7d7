-- Verify runq:function__expire_leases on pg

\set function 'runq._expire_leases(bigint[], boolean, timestamptz)'
\set callers ''
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
