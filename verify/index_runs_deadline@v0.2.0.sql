-- Verify runq:index_runs_deadline on pg

\set index runq.runs_deadline_idx
\ir lib/index.sql
