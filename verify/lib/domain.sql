-- The checks every runq domain passes. Each verify/domain_*.sql names its
-- domain and the type it is over, and includes this file:
--
--     \set domain runq.counter
--     \set base integer
--     \ir lib/domain.sql
--
-- A domain over base, with a CHECK (the rule it exists for) and a COMMENT.

\ir begin.sql
SET LOCAL verify.domain = :'domain';
SET LOCAL verify.base = :'base';

DO $$
DECLARE
    d regtype := current_setting('verify.domain');
    base regtype := current_setting('verify.base');
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = base FROM pg_catalog.pg_type AS t WHERE t.oid = d),
        format('%s is not a domain over %s', d, base);
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c WHERE c.contypid = d AND c.contype = 'c'),
        format('%s has no CHECK', d);
    ASSERT pg_catalog.obj_description(d, 'pg_type') IS NOT NULL, format('%s has no COMMENT', d);
END $$;

ROLLBACK;
