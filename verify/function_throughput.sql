-- Verify runq:function_throughput on pg

\set function 'runq.throughput(timestamptz)'
\set callers 'runq_admin runq_observer'
\set volatility s
\ir lib/function.sql
