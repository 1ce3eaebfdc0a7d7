-- Verify runq:function_usage_report on pg

\set function 'runq.usage_report(timestamptz, timestamptz)'
\set callers 'runq_admin'
\set volatility s
\ir lib/function.sql
