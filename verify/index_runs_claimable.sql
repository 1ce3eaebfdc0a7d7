-- Verify runq:index_runs_claimable on pg

\set index runq.runs_claimable_idx
\ir lib/index.sql
