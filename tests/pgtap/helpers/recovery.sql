-- Helpers the recovery tests (30_sweep .. 33_queue_ttl) share, included with
-- \ir; tests/run hands pg_prove only tests/pgtap/*.sql, so this is not a test.
-- The events of a run as 'type@epoch', in order.
CREATE FUNCTION pg_temp.events(bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e.type || '@' || e.epoch ORDER BY e.event_id), '{}')
      FROM runq.run_events($1) AS e
$$;
-- One sweep, its result as sorted 'run_id:action'.
CREATE FUNCTION pg_temp.swept(max_runs integer DEFAULT 1000) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(s.run_id || ':' || s.action ORDER BY s.run_id, s.action), '{}')
      FROM runq.sweep(max_runs) AS s
$$;
-- A failure record is complete: code, message, attempt, epoch and the time,
-- which is when the run finished.
CREATE FUNCTION pg_temp.failure_complete(bigint) RETURNS boolean LANGUAGE sql AS $$
    SELECT r.failure ?& ARRAY['code', 'message', 'attempt', 'epoch', 'at']
           AND jsonb_typeof(r.failure -> 'message') = 'string'
           AND (r.failure ->> 'at')::timestamptz = r.finished_at
      FROM runq.get_run($1) AS r
$$;
