-- Verify runq:function_claim on pg

\set function 'runq.claim(integer[], text, interval, integer)'
\set callers 'runq_worker runq_admin'
-- The reworked claim, not v0.1.0's: its rows go out by RETURN QUERY.
\set body 'RETURN QUERY'
\ir lib/function.sql
