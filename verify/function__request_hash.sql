-- Verify runq:function__request_hash on pg

\set function 'runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval, jsonb, interval)'
\set callers ''
\ir lib/function.sql
