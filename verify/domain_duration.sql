-- Verify runq:domain_duration on pg

\set domain runq.duration
\set base interval
\ir lib/domain.sql
