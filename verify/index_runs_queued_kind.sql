-- Verify runq:index_runs_queued_kind on pg

\set index runq.runs_queued_kind_idx
\ir lib/index.sql
