-- What every helper here runs in. A transaction: psql interpolates no
-- variable inside a DO body, so a helper passes its variables in as settings
-- (SET LOCAL), which end with it. And ASSERT on, for the session, so that
-- checks after the include in the same file count too: a server may set
-- plpgsql.check_asserts off, and ASSERT then does nothing.
SET plpgsql.check_asserts = on;
BEGIN;
