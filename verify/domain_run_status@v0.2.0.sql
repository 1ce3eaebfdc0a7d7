-- Verify runq:domain_run_status on pg

\set domain runq.run_status
\set base text
\ir lib/domain.sql
