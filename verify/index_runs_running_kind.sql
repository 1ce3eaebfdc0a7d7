-- Verify runq:index_runs_running_kind on pg

\set index runq.runs_running_kind_idx
\ir lib/index.sql
