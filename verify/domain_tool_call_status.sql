-- Verify runq:domain_tool_call_status on pg

\set domain runq.tool_call_status
\set base text
\ir lib/domain.sql
