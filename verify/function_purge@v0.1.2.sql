-- Verify runq:function_purge on pg

\set function 'runq.purge(interval, integer, boolean)'
\set callers 'runq_admin'
\ir lib/function.sql
