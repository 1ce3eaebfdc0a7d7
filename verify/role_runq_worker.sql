-- Verify runq:role_runq_worker on pg

\set role runq_worker
\ir lib/role.sql
