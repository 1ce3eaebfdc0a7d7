-- Revert runq:argument_check_class_key from pg

BEGIN;

DROP FUNCTION runq._check_class_key(text, text);

COMMIT;
