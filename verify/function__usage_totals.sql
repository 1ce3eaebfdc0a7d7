-- Verify runq:function__usage_totals on pg

\set function 'runq._usage_totals(bigint)'
\set callers ''
\set volatility s
\ir lib/function.sql
