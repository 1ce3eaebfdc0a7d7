-- Verify runq:function_read_output on pg

\set function 'runq.read_output(bigint, bigint, integer)'
\set callers 'runq_client runq_worker runq_admin runq_observer'
\set volatility s
\ir lib/function.sql
