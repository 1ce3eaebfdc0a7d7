-- Verify runq:function__resolve_tool_calls on pg

\set function 'runq._resolve_tool_calls(bigint[], timestamptz)'
\set callers ''
\ir lib/function.sql
