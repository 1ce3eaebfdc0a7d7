-- Verify runq:function__expire_leases on pg

\set function 'runq._expire_leases(bigint[], boolean, timestamptz)'
\set callers ''
-- This version calls the admission functions (limits and pauses).
\set body 'runq._requeued('
\ir lib/function.sql
