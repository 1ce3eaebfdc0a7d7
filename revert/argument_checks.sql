-- Revert runq:argument_checks from pg

BEGIN;

DROP FUNCTION runq._run_not_found(bigint), runq._is_names(text[]), runq._is_classes(integer[]),
    runq._is_duration(interval), runq._is_count(integer), runq._check_names(text, text[]), runq._check_classes(text, integer[]),
    runq._first_bad_class(integer[]), runq._check_choice(text, text, text),
    runq._check_object(text, jsonb), runq._check_jsonb(text, jsonb), runq._check_duration(text, interval),
    runq._check_count(text, integer), runq._check_identifier(text, text, boolean),
    runq._bad_argument(text, text, anyelement);

COMMIT;
