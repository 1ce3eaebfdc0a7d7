-- Revert runq:table_model_calls from pg
-- Locks: ACCESS EXCLUSIVE on runq.model_calls, which goes, and for an
-- instant SHARE ROW EXCLUSIVE on runq.runs (its foreign key goes with it).

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.model_calls;

COMMIT;
