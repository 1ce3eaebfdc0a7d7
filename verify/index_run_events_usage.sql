-- Verify runq:index_run_events_usage on pg

\set index runq.run_events_usage_idx
\ir lib/index.sql
