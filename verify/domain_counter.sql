-- Verify runq:domain_counter on pg

\set domain runq.counter
\set base integer
\ir lib/domain.sql
