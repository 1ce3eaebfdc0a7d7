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
