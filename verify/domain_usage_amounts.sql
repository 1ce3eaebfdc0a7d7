-- Verify runq:domain_usage_amounts on pg

\set domain runq.usage_amounts
\set base jsonb
\ir lib/domain.sql
