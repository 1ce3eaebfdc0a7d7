-- Verify runq:domain_event_type on pg

\set domain runq.event_type
\set base text
\ir lib/domain.sql

BEGIN;
-- This version takes run.usage.
SELECT 'run.usage'::runq.event_type;
ROLLBACK;
