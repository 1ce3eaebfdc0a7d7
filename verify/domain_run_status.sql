-- Verify runq:domain_run_status on pg

\set domain runq.run_status
\set base text
\ir lib/domain.sql

BEGIN;
-- This version takes waiting_for_children.
SELECT 'waiting_for_children'::runq.run_status;
ROLLBACK;
