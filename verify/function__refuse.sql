-- Verify runq:function__refuse on pg

\set function 'runq._refuse(bigint, bigint, text, boolean)'
\set callers ''
-- This version notifies the watchers of the runs it ends.
\set body 'runq._notify_watchers('
\ir lib/function.sql
