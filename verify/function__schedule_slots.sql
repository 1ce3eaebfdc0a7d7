-- Verify runq:function__schedule_slots on pg

-- The every arithmetic reads nothing but its arguments (IMMUTABLE); the
-- cron side reads the server's time zone data (STABLE).
\set function 'runq._every_slot(timestamptz, interval, bigint); runq._every_k(timestamptz, interval, timestamptz)'
\set callers ''
\set volatility i
\ir lib/function.sql
\set function 'runq._schedule_after(bigint[], text, interval, timestamptz, timestamptz); runq._schedule_due(bigint[], text, interval, timestamptz, timestamptz, timestamptz)'
\set callers ''
\set volatility s
\ir lib/function.sql
