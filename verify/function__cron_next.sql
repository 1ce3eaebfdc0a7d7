-- Verify runq:function__cron_next on pg

-- The parser and the cron check read nothing but their arguments
-- (IMMUTABLE, as the other argument checks); the time zone check and the
-- next slot read the server's time zone data (STABLE).
\set function 'runq._cron_fields(text, text); runq._check_cron(text, text); runq._next_bit(bigint, integer)'
\set callers ''
\set volatility i
\ir lib/function.sql
\set function 'runq._check_timezone(text, text); runq._cron_walk(bigint[], text, timestamptz); runq._cron_next(text, text, timestamptz)'
\set callers ''
\set volatility s
\ir lib/function.sql
