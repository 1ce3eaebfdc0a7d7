-- Verify runq:function__refuse on pg

\set function 'runq._refuse(bigint, bigint, text, boolean)'
\set callers ''
-- The rework that answers epochs the run never had.
\set body 'NOT BETWEEN 0 AND v_epoch'
\ir lib/function.sql
