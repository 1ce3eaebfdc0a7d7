-- Verify runq:function_ask_user on pg

\set function 'runq.ask_user(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
