-- Verify runq:function__deliver_input on pg

\set function 'runq._deliver_input(bigint, jsonb, timestamptz)'
\set callers ''
-- This version calls the admission functions (limits and pauses).
\set body 'runq._requeued('
\ir lib/function.sql
