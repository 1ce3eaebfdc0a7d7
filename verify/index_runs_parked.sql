-- Verify runq:index_runs_parked on pg

\set index runq.runs_parked_idx
\ir lib/index.sql
