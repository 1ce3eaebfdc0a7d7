-- Verify runq:function__backoff on pg

\set function 'runq._backoff(integer)'
\set callers ''
\ir lib/function.sql
