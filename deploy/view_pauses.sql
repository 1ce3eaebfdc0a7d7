-- Deploy runq:view_pauses to pg
-- requires: table_pause_settings
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

CREATE VIEW runq.pauses AS
SELECT p.scope, p.key, p.reason, p.paused_at
  FROM runq.pause_settings AS p;

GRANT SELECT ON runq.pauses TO runq_admin;

COMMENT ON VIEW runq.pauses IS
    'What is paused: classes, kinds, tenants and schedules, with the reason and when.';

COMMIT;
