-- Verify runq:domain_identifier on pg

\set domain runq.identifier
\set base text
\ir lib/domain.sql
