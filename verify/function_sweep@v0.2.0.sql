-- Verify runq:function_sweep on pg

\set function 'runq.sweep(integer)'
\set callers 'runq_worker runq_admin'
-- This version fails runs past their deadline, running ones found with the expired leases.
\set body 'r.lease_expires_at < v_now OR r.deadline <= v_now'
\ir lib/function.sql
