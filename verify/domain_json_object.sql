-- Verify runq:domain_json_object on pg

\set domain runq.json_object
\set base jsonb
\ir lib/domain.sql
