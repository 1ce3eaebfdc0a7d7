-- Verify runq:function__notify_watchers on pg

\set function 'runq._notify_watchers(bigint[])'
\set callers ''
\ir lib/function.sql
