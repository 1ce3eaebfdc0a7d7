-- Verify runq:domain_recovery_policy on pg

\set domain runq.recovery_policy
\set base text
\ir lib/domain.sql
