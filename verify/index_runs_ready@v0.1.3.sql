-- Verify runq:index_runs_ready on pg

\set index runq.runs_ready_idx
\ir lib/index.sql
