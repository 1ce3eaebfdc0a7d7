-- Verify runq:index_runs_waiting_children on pg

\set index runq.runs_waiting_children_idx
\ir lib/index.sql
