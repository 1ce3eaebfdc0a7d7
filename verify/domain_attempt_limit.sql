-- Verify runq:domain_attempt_limit on pg

\set domain runq.attempt_limit
\set base integer
\ir lib/domain.sql
