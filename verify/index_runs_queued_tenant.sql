-- Verify runq:index_runs_queued_tenant on pg

\set index runq.runs_queued_tenant_idx
\ir lib/index.sql
