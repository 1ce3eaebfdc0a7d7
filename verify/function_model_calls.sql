-- Verify runq:function_model_calls on pg

\set function 'runq.model_calls(bigint)'
\set callers 'runq_worker runq_admin runq_observer'
\set volatility s
\ir lib/function.sql
