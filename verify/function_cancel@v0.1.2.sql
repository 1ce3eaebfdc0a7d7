-- Verify runq:function_cancel on pg

\set function 'runq.cancel(bigint, text)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
