-- Deploy runq:view_queue_stats to pg
-- requires: view_queue_stats@v0.2.0
-- requires: index_runs_held

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Appends waiting_for_children, the runs waiting for their children
-- (runq.wait_children), as the last column: every reader of the first ones
-- still works. They are read with the running and waiting runs, from
-- runs_held_idx. waiting_for_user does not count them.
CREATE OR REPLACE VIEW runq.queue_stats AS
SELECT s.priority::integer AS priority,
       count(*) FILTER (WHERE s.status = 'queued' AND s.ready_at <= c.at)  AS ready,
       count(*) FILTER (WHERE s.status = 'queued' AND s.ready_at > c.at)   AS scheduled,
       count(*) FILTER (WHERE s.status = 'running')                        AS running,
       count(*) FILTER (WHERE s.status = 'waiting_for_user')               AS waiting_for_user,
       count(*) FILTER (WHERE s.status = 'failed')                         AS failed,
       c.at - min(s.created_at) FILTER (WHERE s.status = 'queued' AND s.ready_at <= c.at)
                                                                           AS oldest_ready_age,
       count(*) FILTER (WHERE s.status = 'waiting_for_children')           AS waiting_for_children
  FROM (SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status = 'queued'
        UNION ALL
        SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status IN ('running', 'waiting_for_user', 'waiting_for_children')
        UNION ALL
        SELECT r.priority, r.status, r.ready_at, r.created_at
          FROM runq.runs AS r WHERE r.status = 'failed') AS s
       -- The clock, as claim reads it: now() would be the reader's
       -- transaction start, and runs submitted since would look scheduled.
       CROSS JOIN (SELECT clock_timestamp() AS at) AS c
 GROUP BY s.priority, c.at;

COMMENT ON VIEW runq.queue_stats IS
    'One row per priority class with queued, running, waiting or failed runs: ready, scheduled (not yet due), running, waiting_for_user, failed (the dead letter), oldest_ready_age (from created_at), waiting_for_children.';

COMMIT;
