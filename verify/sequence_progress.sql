-- Verify runq:sequence_progress on pg

BEGIN;

SELECT pg_catalog.pg_sequence_last_value('runq.progress_seq');

ROLLBACK;
