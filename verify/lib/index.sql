-- The checks every index of its own change passes. Each verify/index_*.sql
-- names its index and includes this file:
--
--     \set index runq.runs_ready_idx
--     \ir lib/index.sql
--
-- Valid and ready: a CREATE INDEX CONCURRENTLY that failed leaves the index
-- behind INVALID, which answers no query and, if unique, enforces nothing.
-- Unique exactly when named *_key (PostgreSQL's own names: *_key, *_idx).

\ir begin.sql
SET LOCAL verify.index = :'index';

DO $$
DECLARE
    ix regclass := current_setting('verify.index');
BEGIN
    ASSERT (SELECT i.indisvalid AND i.indisready FROM pg_catalog.pg_index AS i WHERE i.indexrelid = ix),
        format('%s is not a valid index', ix);
    ASSERT (SELECT i.indisunique = (c.relname LIKE '%\_key')
              FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
             WHERE i.indexrelid = ix),
        format('%s: unique and not named *_key, or named *_key and not unique', ix);
END $$;

ROLLBACK;
