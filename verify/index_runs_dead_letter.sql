-- Verify runq:index_runs_dead_letter on pg

\set index runq.runs_dead_letter_idx
\ir lib/index.sql
