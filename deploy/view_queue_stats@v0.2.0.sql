-- Deploy runq:view_queue_stats to pg
-- requires: table_runs
-- requires: index_runs_ready
-- requires: index_runs_held
-- requires: index_runs_dead_letter
-- requires: role_runq_admin

BEGIN;

-- For operators and dashboards. Each branch reads one partial index, so the
-- view never reads the runs that succeeded. ready/scheduled split queued runs
-- by whether ready_at (scheduled_for, else created_at) has passed.
CREATE VIEW runq.queue_stats AS
SELECT s.priority::integer AS priority,
       count(*) FILTER (WHERE s.status = 'queued' AND s.ready_at <= c.at)  AS ready,
       count(*) FILTER (WHERE s.status = 'queued' AND s.ready_at > c.at)   AS scheduled,
       count(*) FILTER (WHERE s.status = 'running')                        AS running,
       count(*) FILTER (WHERE s.status = 'waiting_for_user')               AS waiting_for_user,
       count(*) FILTER (WHERE s.status = 'failed')                         AS failed,
       c.at - min(s.created_at) FILTER (WHERE s.status = 'queued' AND s.ready_at <= c.at)
                                                                           AS oldest_ready_age
  FROM (SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status = 'queued'
        UNION ALL
        SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status IN ('running', 'waiting_for_user')
        UNION ALL
        SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status = 'failed') AS s
       -- The clock, as claim reads it: now() would be the reader's
       -- transaction start, and runs submitted since would look scheduled.
       CROSS JOIN (SELECT clock_timestamp() AS at) AS c
 GROUP BY s.priority, c.at;

REVOKE ALL ON runq.queue_stats FROM PUBLIC;
GRANT SELECT ON runq.queue_stats TO runq_admin;

COMMENT ON VIEW runq.queue_stats IS
    'One row per priority class with queued, running, waiting or failed runs: ready, scheduled (not yet due), running, waiting_for_user, failed (the dead letter), oldest_ready_age (from created_at).';

COMMIT;
