-- Verify runq:domain_epoch on pg

\set domain runq.epoch
\set base bigint
\ir lib/domain.sql
