-- Verify runq:function__wake_parents on pg

\set function 'runq._wake_parents(bigint[], timestamptz); runq._lock_parents(bigint[]); runq._family_ended(bigint[], bigint[], timestamptz)'
\set callers ''
\ir lib/function.sql
