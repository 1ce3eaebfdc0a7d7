-- The two references every runq figure is divided by, created beside runq in
-- the benchmark database.

-- The ceiling: a single-row UPDATE by primary key, one per transaction. No
-- queue can commit transactions faster than this server does.
CREATE TABLE bench_ceiling (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO bench_ceiling (id) SELECT g FROM generate_series(1, 1000) AS g;

-- The minimal queue: two columns, claimed with FOR UPDATE SKIP LOCKED and
-- marked done, nothing else: no lease, no event, no attempt count. The
-- partial index is what any real queue has, so that claiming does not walk
-- the finished rows.
CREATE TABLE bench_minq (id bigserial PRIMARY KEY, state smallint NOT NULL DEFAULT 0);
CREATE INDEX bench_minq_ready ON bench_minq (id) WHERE state = 0;

-- The floor: the minimal queue with only what the runq contract and its
-- security rules make every call pay, so the cost of each part can be told
-- apart from the cost of runq's own design. Workers reach it through
-- SECURITY DEFINER functions with a pinned search_path; every claim bumps a
-- fencing epoch and every completion asserts it; each transition writes one
-- event row, in the same statement, into a log keyed like runq.run_events.
-- No attempts, no sessions, no checkpoints, no CHECKs; a lease only as far
-- as the heartbeat extends one (the claim sets none, as before the heartbeat
-- was added: the floor's cycle stayed as it was measured).
CREATE TABLE bench_floor (id bigserial PRIMARY KEY, state smallint NOT NULL DEFAULT 0,
                          epoch bigint NOT NULL DEFAULT 0, lease_expires_at timestamptz);
CREATE INDEX bench_floor_ready ON bench_floor (id) WHERE state = 0;
CREATE TABLE bench_floor_events (
    run_id bigint NOT NULL, event_id bigint GENERATED ALWAYS AS IDENTITY,
    epoch bigint NOT NULL, created_at timestamptz NOT NULL, type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}', PRIMARY KEY (run_id, event_id));

CREATE FUNCTION bench_floor_claim(OUT run_id bigint, OUT epoch bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH claimed AS (
        UPDATE public.bench_floor AS q SET state = 1, epoch = q.epoch + 1
         WHERE q.id = (SELECT f.id FROM public.bench_floor AS f WHERE f.state = 0
                        ORDER BY f.id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING q.id, q.epoch
    ), logged AS (
        INSERT INTO public.bench_floor_events (run_id, epoch, created_at, type)
        SELECT c.id, c.epoch, clock_timestamp(), 'run.claimed' FROM claimed AS c
    )
    SELECT c.id, c.epoch INTO run_id, epoch FROM claimed AS c;
END $$;

CREATE FUNCTION bench_floor_complete(run_id bigint, epoch bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH done AS (
        UPDATE public.bench_floor AS q SET state = 2
         WHERE q.id = bench_floor_complete.run_id AND q.state = 1
           AND q.epoch = bench_floor_complete.epoch
        RETURNING q.id, q.epoch
    )
    INSERT INTO public.bench_floor_events (run_id, epoch, created_at, type)
    SELECT d.id, d.epoch, clock_timestamp(), 'run.succeeded' FROM done AS d;
    RETURN FOUND;
END $$;

-- The floor's heartbeat: a fenced lease extension, the least a heartbeat can
-- be. The lease is in no index, so the update is HOT. Written once, before
-- runq's hot-path storage was redesigned, and not to be changed after: it is
-- what runq's heartbeat is judged against.
CREATE FUNCTION bench_floor_heartbeat(run_id bigint, epoch bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE public.bench_floor AS q SET lease_expires_at = now() + interval '30 seconds'
     WHERE q.id = bench_floor_heartbeat.run_id AND q.state = 1
       AND q.epoch = bench_floor_heartbeat.epoch;
    RETURN FOUND;
END $$;
