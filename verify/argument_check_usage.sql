-- Verify runq:argument_check_usage on pg

\set function 'runq._is_usage(jsonb); runq._check_usage(text, jsonb, boolean)'
\set callers ''
\ir lib/function.sql
