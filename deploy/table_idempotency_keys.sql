-- Deploy runq:table_idempotency_keys to pg
-- requires: table_runs

BEGIN;

-- Idempotency is a table, not a convention. The key is scoped by tenant and
-- principal (a NULL principal is one scope of its own: NULLS NOT DISTINCT), and
-- request_hash tells a client retry from reuse of a key for another request.
-- run_id is NULL only inside the submitting transaction, between claiming the
-- key and routing the request.
CREATE TABLE runq.idempotency_keys (
    tenant_id        text        NOT NULL,
    principal_id     text,
    idempotency_key  text        NOT NULL CHECK (idempotency_key <> ''),
    request_hash     bytea       NOT NULL,
    run_id           bigint      REFERENCES runq.runs (run_id),
    created_at       timestamptz NOT NULL,
    CONSTRAINT idempotency_keys_scope_key
        UNIQUE NULLS NOT DISTINCT (tenant_id, principal_id, idempotency_key)
);

CREATE INDEX idempotency_keys_run_idx ON runq.idempotency_keys (run_id);

COMMENT ON TABLE runq.idempotency_keys IS
    'Submit idempotency keys per (tenant, principal), with the SHA-256 of the request they were first used for.';

COMMIT;
