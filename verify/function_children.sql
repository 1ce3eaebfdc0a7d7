-- Verify runq:function_children on pg

\set function 'runq.children(bigint)'
\set callers 'runq_client runq_worker runq_admin runq_observer'
\ir lib/function.sql
