-- Deploy runq:schema_runq to pg

BEGIN;

CREATE SCHEMA runq;

COMMENT ON SCHEMA runq IS
    'runq: a durable run queue for AI-agent runs. Reach it only through its functions.';

-- Nobody but the owner may create objects here or look names up by default.
REVOKE ALL ON SCHEMA runq FROM PUBLIC;

COMMIT;
