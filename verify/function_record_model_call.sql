-- Verify runq:function_record_model_call on pg

\set function 'runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb)'
\set callers 'runq_worker runq_admin'
\set volatility v
\ir lib/function.sql
