-- Verify runq:index_runs_queue_expiry on pg

\set index runq.runs_queue_expiry_idx
\ir lib/index.sql
