-- Verify runq:index_runs_live_children on pg

\set index runq.runs_live_children_idx
\ir lib/index.sql
