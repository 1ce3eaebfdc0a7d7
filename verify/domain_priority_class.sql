-- Verify runq:domain_priority_class on pg

\set domain runq.priority_class
\set base smallint
\ir lib/domain.sql
