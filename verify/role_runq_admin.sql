-- Verify runq:role_runq_admin on pg

\set role runq_admin
\ir lib/role.sql
