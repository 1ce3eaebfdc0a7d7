-- Verify runq:function__cancel_children on pg

\set function 'runq._lock_descendants(bigint[]); runq._cancel_children(bigint[], timestamptz)'
\set callers ''
\ir lib/function.sql
