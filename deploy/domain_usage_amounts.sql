-- Deploy runq:domain_usage_amounts to pg
-- requires: argument_check_usage

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The rule of runq._is_usage, as a domain for the budget column: a domain's
-- check runs only when a value is assigned (see deploy/domain_duration.sql).
-- squawk-ignore ban-create-domain-with-constraint
CREATE DOMAIN runq.usage_amounts AS jsonb CHECK (
    runq._is_usage(VALUE));

COMMENT ON DOMAIN runq.usage_amounts IS
    'Usage or a budget of it: a non-empty object of non-negative numbers, e.g. {"cost_usd": 2.00}.';

COMMIT;
