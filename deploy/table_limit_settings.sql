-- Deploy runq:table_limit_settings to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The concurrency limits runq.set_limit writes. key NULL is the default of its
-- scope, for every tenant (or kind) without a row of its own; NULLS NOT
-- DISTINCT makes that default one row, like every key.
CREATE TABLE runq.limit_settings (
    scope        text    NOT NULL CHECK (scope IN ('tenant', 'kind')),
    key          text,
    max_running  bigint  NOT NULL CHECK (max_running >= 1),
    CONSTRAINT limit_settings_key UNIQUE NULLS NOT DISTINCT (scope, key)
);

-- A lowered limit that running runs still exceed: each run of the key that
-- leaves its slot pays one unit instead of handing the slot on, so no parked
-- run is admitted until the count is under the new limit.
CREATE TABLE runq.limit_debts (
    scope  text    NOT NULL CHECK (scope IN ('tenant', 'kind')),
    key    text    NOT NULL,
    debt   bigint  NOT NULL CHECK (debt >= 1),
    PRIMARY KEY (scope, key)
);

COMMENT ON TABLE runq.limit_settings IS
    'Concurrency limits per tenant or kind (key NULL: the default of the scope); written by runq.set_limit.';
COMMENT ON TABLE runq.limit_debts IS
    'Slots a lowered limit still owes: runs of the key that leave running pay them before a parked run is admitted.';

COMMIT;
