-- Deploy runq:table_settings to pg
-- requires: schema_runq

BEGIN;

-- One row of defaults a DBA may UPDATE in place. The boolean key with a CHECK
-- makes a second row impossible, so every function reads the same values.
CREATE TABLE runq.settings (
    singleton     boolean  PRIMARY KEY DEFAULT true CHECK (singleton),
    lease         interval NOT NULL DEFAULT interval '30 seconds'
                  CHECK (lease > interval '0'),
    backoff_base  interval NOT NULL DEFAULT interval '1 second'
                  CHECK (backoff_base > interval '0'),
    backoff_cap   interval NOT NULL DEFAULT interval '5 minutes'
                  CHECK (backoff_cap >= backoff_base),
    -- NULL: derived, max(2 min, 5 x a heartbeat interval of a third of the lease).
    stale_after   interval CHECK (stale_after > interval '0')
);

INSERT INTO runq.settings DEFAULT VALUES;

COMMENT ON TABLE runq.settings IS
    'The single row of queue defaults: lease length, sweep backoff base and cap, orphan staleness.';
COMMENT ON COLUMN runq.settings.lease IS
    'Lease length for claims that pass no lease; heartbeats extend a lease by its own length.';
COMMENT ON COLUMN runq.settings.backoff_base IS
    'A resume-policy run requeued by the sweep waits least(backoff_cap, backoff_base * 2^(attempts-1)).';
COMMENT ON COLUMN runq.settings.backoff_cap IS
    'Upper bound of the sweep backoff.';
COMMENT ON COLUMN runq.settings.stale_after IS
    'Heartbeat age after which orphan_report calls a run stale; NULL means greatest(2 min, 5 * lease / 3).';

COMMIT;
