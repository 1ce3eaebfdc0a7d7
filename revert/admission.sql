-- Revert runq:admission from pg

BEGIN;

DROP FUNCTION runq._slot_left(text, text);
DROP FUNCTION runq._requeued(bigint, boolean);
DROP FUNCTION runq._park_on_entry();
DROP FUNCTION runq._rebalance(boolean);
DROP FUNCTION runq._room_tried(text, text);
DROP FUNCTION runq._admit_parked(text, text, boolean);
DROP FUNCTION runq._admissible(text, text, integer, timestamptz, boolean);
DROP FUNCTION runq._pay_debt(text, text);
DROP FUNCTION runq._key_lock(text, text);
DROP FUNCTION runq._lock_settings();
DROP FUNCTION runq._settings_lock();
DROP FUNCTION runq._counts_are_fresh();
DROP FUNCTION runq._paused(integer, text, text);
DROP FUNCTION runq._taken(text, text, bigint);
DROP FUNCTION runq._limit_of(text, text);

COMMIT;
