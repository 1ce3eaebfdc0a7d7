-- Verify runq:domain_failure_record on pg

\set domain runq.failure_record
\set base jsonb
\ir lib/domain.sql
