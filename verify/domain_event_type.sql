-- Verify runq:domain_event_type on pg

\set domain runq.event_type
\set base text
\ir lib/domain.sql

BEGIN;
-- This version takes the events of child runs.
SELECT 'run.children_done'::runq.event_type;
ROLLBACK;
