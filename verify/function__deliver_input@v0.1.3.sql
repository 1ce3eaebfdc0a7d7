-- Verify runq:function__deliver_input on pg

\set function 'runq._deliver_input(bigint, jsonb, timestamptz)'
\set callers ''
\ir lib/function.sql
