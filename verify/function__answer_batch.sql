-- Verify runq:function__answer_batch on pg

\set function 'runq._answer_batch(bigint[], bigint[], jsonb[], bigint[], text, boolean)'
\set callers ''
\ir lib/function.sql
