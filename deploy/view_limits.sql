-- Deploy runq:view_limits to pg
-- requires: table_limit_settings
-- requires: index_runs_running_tenant
-- requires: index_runs_running_kind
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- running: one range of runs_running_tenant_idx (or _kind) per keyed row.
CREATE VIEW runq.limits AS
SELECT l.scope, l.key, l.max_running::integer AS max_running,
       CASE WHEN l.key IS NULL THEN NULL
            WHEN l.scope = 'tenant'
            THEN (SELECT count(*) FROM runq.runs AS r
                   WHERE r.tenant_id = l.key AND r.status = 'running' AND r.lease IS NOT NULL)
            ELSE (SELECT count(*) FROM runq.runs AS r
                   WHERE r.kind = l.key AND r.status = 'running' AND r.lease IS NOT NULL)
       END AS running
  FROM runq.limit_settings AS l;

GRANT SELECT ON runq.limits TO runq_admin;

COMMENT ON VIEW runq.limits IS
    'The concurrency limits (key NULL: the default of the scope) with the running count of each keyed row.';

COMMIT;
