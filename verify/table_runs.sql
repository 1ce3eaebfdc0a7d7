-- Verify runq:table_runs on pg

BEGIN;

SELECT run_id, lease_epoch, last_checkpoint, created_at, updated_at, scheduled_for,
       ready_at, expires_at, heartbeat_at, lease_expires_at, finished_at, lease,
       queue_ttl, attempts, max_attempts, turns, tools_begun, priority,
       cancel_requested, status, recovery_policy, tenant_id, session_id, kind,
       principal_id, lease_owner, payload, result, failure, question
  FROM runq.runs
 WHERE false;

ROLLBACK;
