-- Verify runq:index_runs_running_tenant on pg

\set index runq.runs_running_tenant_idx
\ir lib/index.sql
