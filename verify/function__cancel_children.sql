-- Verify runq:function__cancel_children on pg

\set function 'runq._cancel_children(bigint[], timestamptz)'
\set callers ''
\ir lib/function.sql
