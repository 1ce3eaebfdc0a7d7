-- Verify runq:function__inputs_after on pg

\set function 'runq._inputs_after(bigint, bigint)'
\set callers ''
-- VOLATILE: its read takes a snapshot of its own, after claim locked the run.
\set volatility v
\ir lib/function.sql
