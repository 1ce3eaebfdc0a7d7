-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer, text[])'
\set callers 'runq_worker runq_admin'
-- The claim that filters by kind (the helper checks no other claim is left).
\set body 'r.kind = kd.kind'
\ir lib/function.sql
