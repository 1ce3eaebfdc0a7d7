-- Verify runq:function_ask_user on pg

\set function 'runq.ask_user(bigint, bigint, jsonb)'
\set callers 'runq_worker runq_admin'
-- This version fails a run past its deadline (through runq._refuse).
\set body 'r.deadline > v_now'
\ir lib/function.sql
