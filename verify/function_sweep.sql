-- Verify runq:function_sweep on pg

\set function 'runq.sweep(integer)'
\set callers 'runq_worker runq_admin'
-- This version notifies watchers and forgets the watches of ended sessions.
\set body 'runq._forget_watches()'
\ir lib/function.sql
