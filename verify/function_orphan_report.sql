-- Verify runq:function_orphan_report on pg

\set function 'runq.orphan_report(interval)'
\set callers 'runq_admin'
\ir lib/function.sql
