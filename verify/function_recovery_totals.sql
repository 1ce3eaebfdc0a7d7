-- Verify runq:function_recovery_totals on pg

\set function 'runq.recovery_totals()'
\set callers 'runq_admin runq_observer'
\set volatility s
\ir lib/function.sql
