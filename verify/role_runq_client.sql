-- Verify runq:role_runq_client on pg

\set role runq_client
\ir lib/role.sql
