-- Verify runq:index_run_events_fenced on pg

\set index runq.run_events_fenced_key
\ir lib/index.sql
