-- Verify runq:index_runs_ready_kind on pg

\set index runq.runs_ready_kind_idx
\ir lib/index.sql
