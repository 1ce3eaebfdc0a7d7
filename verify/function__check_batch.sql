-- Verify runq:function__check_batch on pg

\set function 'runq._check_batch(bigint[], bigint[], jsonb[])'
\set callers ''
\set volatility i
\ir lib/function.sql
