-- Deploy runq:table_spawns to pg
-- requires: table_runs
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for the foreign key (no row is read: the new table is empty), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Each parent's children by the key it spawned them under (runq.spawn): the
-- key names one child for the parent's whole life, so a resumed attempt that
-- spawns again finds it here. A table of its own, not columns and a unique
-- index of runs: a claim or a complete of any run then tests no predicate of
-- it. The request's hash tells a retry from a different request (RQ001).
-- The parent's foreign key cascades: runq.purge of a parent takes its keys
-- (its children stay, as runs). The child is no foreign key: a child purged
-- before its parent keeps its key used.
CREATE TABLE runq.spawns (
    parent_run_id bigint NOT NULL REFERENCES runq.runs (run_id) ON DELETE CASCADE,
    key           text   NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
    run_id        bigint NOT NULL,
    request_hash  bytea  NOT NULL,
    PRIMARY KEY (parent_run_id, key)
);

COMMENT ON TABLE runq.spawns IS
    'Each parent''s children by key (runq.spawn), with the SHA-256 of the request that spawned each, compared when a key is spawned again.';

COMMIT;
