-- Verify runq:function__refuse on pg

\set function 'runq._refuse(bigint, bigint, text, boolean)'
\set callers ''
-- This version calls the admission functions (limits and pauses).
\set body 'runq._slot_left('
\ir lib/function.sql
