-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer, text[])'
\set callers 'runq_worker runq_admin'
-- This version takes admitted runs only, and asks runq._swap_in when short.
\set body 'runq._swap_in('
\ir lib/function.sql
