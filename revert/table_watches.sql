-- Revert runq:table_watches from pg
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (its foreign key's triggers go with the table; no row is read), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.watches;

COMMIT;
