-- Verify runq:table_limit_settings on pg

BEGIN;

SELECT scope, key, max_running FROM runq.limit_settings WHERE false;
SELECT scope, key, debt FROM runq.limit_debts WHERE false;

ROLLBACK;
