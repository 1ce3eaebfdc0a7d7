-- Verify runq:function__expire_leases on pg

\set function 'runq._expire_leases(bigint[], boolean, timestamptz)'
\set callers ''
-- This version fails a run past its deadline.
\set body 'deadline_exceeded'
\ir lib/function.sql
