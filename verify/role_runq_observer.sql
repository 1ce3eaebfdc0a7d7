-- Verify runq:role_runq_observer on pg

\set role runq_observer
\ir lib/role.sql
