-- Verify runq:function__checkpoint_state on pg

\set function 'runq._checkpoint_state(bigint, bigint)'
\set callers ''
-- VOLATILE: its read takes a snapshot of its own, after claim locked the run.
\set volatility v
\ir lib/function.sql
