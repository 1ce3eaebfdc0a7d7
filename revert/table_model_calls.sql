-- Revert runq:table_model_calls from pg
-- Locks: ACCESS EXCLUSIVE on runq.model_calls, which goes, and for an
-- instant ACCESS EXCLUSIVE on runq.runs (dropping the foreign key's triggers
-- there): reads of runs wait for it too, at most lock_timeout.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.model_calls;

COMMIT;
