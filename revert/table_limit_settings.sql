-- Revert runq:table_limit_settings from pg
-- Locks: ACCESS EXCLUSIVE on runq.limit_settings and runq.limit_debts, tables of a few rows, to drop them.

BEGIN;

DROP TABLE runq.limit_debts;
DROP TABLE runq.limit_settings;

COMMIT;
