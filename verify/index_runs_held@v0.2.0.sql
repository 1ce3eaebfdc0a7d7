-- Verify runq:index_runs_held on pg

\set index runq.runs_held_idx
\ir lib/index.sql
