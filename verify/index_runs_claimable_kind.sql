-- Verify runq:index_runs_claimable_kind on pg

\set index runq.runs_claimable_kind_idx
\ir lib/index.sql
