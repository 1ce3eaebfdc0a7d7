-- Verify runq:index_runs_session_active on pg

\set index runq.runs_session_active_key
\ir lib/index.sql
