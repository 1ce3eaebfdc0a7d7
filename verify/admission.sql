-- Verify runq:admission on pg

\set function 'runq._limit_of(text, text); runq._taken(text, text, bigint); runq._paused(integer, text, text); runq._counts_are_fresh(); runq._settings_lock(); runq._lock_settings(); runq._key_lock(text, text); runq._pay_debt(text, text); runq._admissible(text, text, integer, timestamptz, boolean); runq._admit_parked(text, text, boolean); runq._room_tried(text, text); runq._rebalance(boolean); runq._park_on_entry(); runq._requeued(bigint, boolean); runq._slot_left(text, text)'
\set callers ''
\ir lib/function.sql
