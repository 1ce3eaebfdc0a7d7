-- Verify runq:domain_tool_idempotency on pg

\set domain runq.tool_idempotency
\set base text
\ir lib/domain.sql
