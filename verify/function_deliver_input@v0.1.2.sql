-- Verify runq:function_deliver_input on pg

\set function 'runq.deliver_input(bigint, jsonb)'
\set callers 'runq_client runq_admin'
\ir lib/function.sql
