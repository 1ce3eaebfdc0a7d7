-- Verify runq:function__expire_leases on pg

\set function 'runq._expire_leases(bigint[], boolean, timestamptz)'
\set callers ''
\ir lib/function.sql
