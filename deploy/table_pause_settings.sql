-- Deploy runq:table_pause_settings to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- What runq.pause stopped. A class key is the class as text ('10'), so one
-- key column serves every scope; runq.pause checks it is a class.
CREATE TABLE runq.pause_settings (
    scope      text        NOT NULL CHECK (scope IN ('class', 'kind', 'tenant', 'schedule')),
    key        text        NOT NULL,
    reason     text,
    paused_at  timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

COMMENT ON TABLE runq.pause_settings IS
    'Paused classes, kinds, tenants and schedules; written by runq.pause and runq.resume.';

COMMIT;
