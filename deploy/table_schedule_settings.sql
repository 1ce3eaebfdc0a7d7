-- Deploy runq:table_schedule_settings to pg
-- requires: schema_runq
-- requires: domain_identifier
-- requires: domain_json_object
-- requires: domain_priority_class
-- requires: domain_attempt_limit
-- requires: domain_recovery_policy
-- requires: domain_duration
-- Locks: none on a table in use: it creates runq.schedule_settings and its index, both new.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- One row per schedule, written by runq.create_schedule and runq.drop_schedule
-- and advanced by runq.tick (docs/contract.md "Schedules"); runq.schedules is the
-- view of it. The run fields (tenant_id .. timeout) are what each run the
-- schedule creates gets, as runq.submit would store them; every column a run
-- takes over has the domain of its runs column, so a schedule cannot hold a
-- value a run may not.
--   * next_slot: the first slot not yet handled. tick takes the schedules
--     whose next_slot has come, from the head of schedule_settings_due_idx,
--     so a tick with nothing due reads one index page however many schedules
--     exist. 'infinity' for a cron expression that no longer matches any
--     local time (runq._schedule_after): never due.
--   * last_slot: the newest slot handled (created, skipped or missed);
--     last_run_id: the newest run a slot created. No foreign key: purge
--     deletes finished runs, and a schedule's history must not stop it.
--   * cron_fields: cron parsed (runq._cron_fields), which a tick walks
--     without parsing the text again: parsing costs more than the walk.
--   * created_at: the origin of an every schedule's slots,
--     created_at + k * every (k >= 1), counted in UTC (runq._every_slot).
-- Exactly one of cron and every, as create_schedule checks first (22023);
-- the CHECK holds it for any other writer.
CREATE TABLE runq.schedule_settings (
    created_at       timestamptz          NOT NULL,
    next_slot        timestamptz          NOT NULL,
    last_slot        timestamptz,
    last_run_id      bigint,
    every            runq.duration,
    queue_ttl        runq.duration,
    timeout          runq.duration,
    max_attempts     runq.attempt_limit   NOT NULL,
    priority         runq.priority_class  NOT NULL,
    name             runq.identifier      PRIMARY KEY,
    tenant_id        runq.identifier      NOT NULL,
    kind             runq.identifier      NOT NULL,
    cron             text,
    cron_fields      bigint[],
    timezone         text                 NOT NULL,
    recovery_policy  runq.recovery_policy NOT NULL,
    payload          runq.json_object     NOT NULL,
    CONSTRAINT schedule_settings_cron_or_every CHECK ((cron IS NULL) <> (every IS NULL)),
    CONSTRAINT schedule_settings_cron_parsed CHECK ((cron IS NULL) = (cron_fields IS NULL))
);

-- tick's pick, in its order: the due schedules, soonest slot first, by name
-- for a total order.
CREATE INDEX schedule_settings_due_idx ON runq.schedule_settings (next_slot, name);

COMMENT ON TABLE runq.schedule_settings IS
    'Schedules: what each run gets, when the next slot is, what was handled last; written by runq.create_schedule, runq.drop_schedule and runq.tick.';
COMMENT ON COLUMN runq.schedule_settings.next_slot IS
    'The first slot not yet handled; tick takes the schedule once it has come (infinity: never).';
COMMENT ON COLUMN runq.schedule_settings.last_slot IS
    'The newest slot handled: created, skipped_overlap or missed.';
COMMENT ON COLUMN runq.schedule_settings.last_run_id IS
    'The newest run a slot created (no foreign key: purge may have deleted it).';
COMMENT ON COLUMN runq.schedule_settings.cron_fields IS
    'cron parsed by runq._cron_fields, for runq._cron_walk.';
COMMENT ON COLUMN runq.schedule_settings.created_at IS
    'When the schedule was first created; an every schedule fires at created_at + k * every, k >= 1, counted in UTC.';

COMMIT;
