-- Revert runq:role_runq_observer from pg

BEGIN;

-- The role itself stays: it is cluster-wide and other databases in this
-- cluster may still have runq deployed. Only this database's grant goes.
REVOKE USAGE ON SCHEMA runq FROM runq_observer;

COMMIT;
