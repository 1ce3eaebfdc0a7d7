-- Verify runq:function_complete_and_claim on pg

\set function 'runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
