-- Verify runq:function_run_events on pg

\set function 'runq.run_events(bigint)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
