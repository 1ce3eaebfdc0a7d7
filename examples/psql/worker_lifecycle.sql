-- The whole worker lifecycle with nothing but psql:
--
--     psql -v ON_ERROR_STOP=1 -f examples/psql/worker_lifecycle.sql -d postgresql://...
--
-- Needs a database with runq deployed (a fresh one: it claims the oldest
-- queued interactive run, which must be its own). Every step checks what
-- runq returned against the contract with \if; a check that fails prints
-- FAILED and stops the script with a non-zero exit status.

\set QUIET on
\set ON_ERROR_STOP on
\pset footer off
-- Used in a failed check's \else branch: an error, so psql exits non-zero.
\set abort 'DO $$BEGIN RAISE EXCEPTION ''a result broke the runq contract (see FAILED above)''; END$$;'

\echo '1. A submitter (role runq_client) submits an interactive run (class 0).'
SELECT s.run_id, s.outcome, s.outcome = 'created' AS ok
  FROM runq.submit(tenant_id => 'acme', kind => 'chat.turn', payload => '{"text": "hi"}',
                   session_id => 'psql-example', priority => 0) AS s \gset
\if :ok
  \echo '   runq.submit -> run' :run_id :outcome
\else
  \echo 'FAILED: runq.submit returned outcome' :outcome 'instead of created'
  :abort
\endif

\echo '2. A worker (role runq_worker) claims it: the claim starts lease epoch 1.'
\echo '   Every later write of this worker carries (run_id, epoch).'
SELECT c.epoch, c.attempt, c.run_id = :run_id AND c.epoch = 1 AND NOT c.resumed AS ok
  FROM runq.claim(classes => ARRAY[0, 10], worker_id => 'psql-worker',
                  lease => interval '30 seconds') AS c \gset
\if :ok
  \echo '   runq.claim -> run' :run_id 'epoch' :epoch 'attempt' :attempt
\else
  \echo 'FAILED: runq.claim did not return run' :run_id 'at epoch 1'
  :abort
\endif

\echo '3. It heartbeats (extends the lease), starts a turn before the model call,'
\echo '   brackets a tool call with begin_tool/end_tool and checkpoints at the tool boundary.'
SELECT runq.heartbeat(:run_id, :epoch) AND runq.begin_turn(:run_id, :epoch)
       AND runq.begin_tool(:run_id, :epoch, call_id => 'call-1', tool => 'web_search',
                           idempotency => 'read_only', args => '{"q": "runq"}')
       AND runq.end_tool(:run_id, :epoch, call_id => 'call-1', outcome => '{"hits": 3}')
       AND runq.checkpoint(:run_id, :epoch, state => '{"step": 1}') AS ok \gset
\if :ok
  \echo '   heartbeat, begin_turn, begin_tool, end_tool, checkpoint -> true (the run is ours)'
\else
  \echo 'FAILED: a write of the lease holder returned false'
  :abort
\endif

\echo '4. It shuts down gracefully: runq.release gives the lease back; the run is queued'
\echo '   again at once (policy resume) and the attempt is not counted.'
SELECT runq.release(:run_id, :epoch) AS released \gset
SELECT r.status, r.attempts, :'released'::boolean AND r.status = 'queued' AND r.attempts = 0 AS ok
  FROM runq.get_run(:run_id) AS r \gset
\if :ok
  \echo '   runq.release -> true; the run is' :status 'with' :attempts 'attempts used'
\else
  \echo 'FAILED: release returned' :released '; the run is' :status 'with' :attempts 'attempts'
  :abort
\endif

\echo '5. Another worker claims it: epoch 2, resumed from the checkpoint.'
SELECT c.epoch AS new_epoch, c.checkpoint AS resumed_from,
       c.run_id = :run_id AND c.epoch = 2 AND c.resumed
       AND c.checkpoint = '{"step": 1}' AS ok
  FROM runq.claim(classes => ARRAY[0], worker_id => 'psql-worker-2') AS c \gset
\if :ok
  \echo '   runq.claim -> run' :run_id 'epoch' :new_epoch 'resumed from checkpoint' :resumed_from
\else
  \echo 'FAILED: the second claim did not resume run' :run_id 'at epoch 2'
  :abort
\endif

\echo '6. The first worker, still holding epoch 1, tries to write: it is fenced.'
\echo '   Its writes return false, change nothing, and log one run.fenced event.'
SELECT runq.heartbeat(:run_id, :epoch) AS stale_heartbeat,
       runq.complete(:run_id, :epoch, result => '{"by": "the stale worker"}') AS stale_complete
\gset
SELECT r.status AS status_now, r.lease_epoch AS epoch_now,
       NOT :'stale_heartbeat'::boolean AND NOT :'stale_complete'::boolean
       AND r.status = 'running'
       AND r.lease_epoch = 2
       AND (SELECT count(*) FROM runq.run_events(:run_id) AS e
             WHERE e.type = 'run.fenced' AND e.epoch = :epoch) = 1 AS ok
  FROM runq.get_run(:run_id) AS r \gset
\if :ok
  \echo '   fenced: heartbeat and complete with stale epoch' :epoch 'returned false;'
  \echo '   the run is still' :status_now 'at epoch' :epoch_now '(one run.fenced event)'
\else
  \echo 'FAILED: a stale write was not fenced (heartbeat' :stale_heartbeat ', complete'
  \echo '        ' :stale_complete '); the run is' :status_now 'at epoch' :epoch_now
  :abort
\endif

\echo '7. The lease holder completes the run.'
SELECT runq.complete(:run_id, :new_epoch, result => '{"text": "hello"}') AS completed \gset
SELECT r.status, :'completed'::boolean AND r.status = 'succeeded' AS ok
  FROM runq.get_run(:run_id) AS r \gset
\if :ok
  \echo '   runq.complete -> true; the run' :status
\else
  \echo 'FAILED: complete returned' :completed '; the run is' :status
  :abort
\endif

\echo '8. Its event log (runq.run_events) and tool calls (runq.tool_calls):'
SELECT e.epoch, e.type, e.payload FROM runq.run_events(:run_id) AS e ORDER BY e.event_id;
SELECT t.call_id, t.tool, t.idempotency, t.status, t.epoch FROM runq.tool_calls(:run_id) AS t;
\echo 'The whole lifecycle held: submit, claim, heartbeat, turn, tool call, checkpoint,'
\echo 'release, reclaim, a fenced stale write and complete.'
