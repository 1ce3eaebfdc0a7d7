-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer)'
\set callers 'runq_worker runq_admin'
\ir lib/function.sql
