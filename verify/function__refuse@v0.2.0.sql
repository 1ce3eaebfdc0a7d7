-- Verify runq:function__refuse on pg

\set function 'runq._refuse(bigint, bigint, text, boolean)'
\set callers ''
-- This version fails a run past its deadline or at its budget.
\set body 'runq._stop_failure('
\ir lib/function.sql
