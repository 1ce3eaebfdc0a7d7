-- The foundation schema: every table, column, constraint, index and trigger
-- with its intended type, and the constraints proved by what they reject.
-- Fixtures here write the tables directly, as the superuser pg_prove runs as:
-- this file tests the schema, not the functions.
BEGIN;
SELECT plan(458);

-- ---------------------------------------------------------------------------
-- Schema, roles, tables, sequences, types
-- ---------------------------------------------------------------------------
SELECT has_schema('runq');
SELECT tables_are('runq',
    ARRAY['settings', 'runs', 'run_events', 'idempotency_keys',
          'checkpoints', 'inputs', 'tool_calls', 'limit_settings', 'limit_debts',
          'pause_settings', 'run_usage', 'schedule_settings', 'watches', 'run_output',
          'model_calls', 'spawns']);
SELECT sequences_are('runq',
    ARRAY['idle_mark', 'progress_seq', 'runs_run_id_seq', 'run_events_event_id_seq']);
SELECT types_are('runq', ARRAY['run_info', 'run_event', 'identifier', 'run_status', 'recovery_policy',
                               'priority_class', 'counter', 'attempt_limit', 'epoch', 'duration',
                               'json_object', 'failure_record', 'event_type', 'tool_idempotency',
                               'tool_call_status', 'run_shape', 'consistent_run_shape', 'completed_and_claimed',
                               'child_info']);
-- Each column's own rule is a domain (checked only when the column is
-- written, from a cached expression), not a table CHECK (rebuilt by every
-- UPDATE of the row).
SELECT domains_are('runq', ARRAY['identifier', 'run_status', 'recovery_policy', 'priority_class',
                                 'counter', 'attempt_limit', 'epoch', 'duration', 'json_object',
                                 'failure_record', 'event_type', 'tool_idempotency',
                                 'tool_call_status', 'consistent_run_shape']);

SELECT has_role(r) FROM unnest(ARRAY['runq_worker', 'runq_client', 'runq_admin']) AS r;
SELECT is((SELECT rolcanlogin FROM pg_catalog.pg_roles WHERE rolname = r), false,
          r || ' is NOLOGIN')
  FROM unnest(ARRAY['runq_worker', 'runq_client', 'runq_admin']) AS r;
SELECT ok(NOT has_schema_privilege('public', 'runq', 'CREATE'),
          'PUBLIC cannot create objects in schema runq');

-- ---------------------------------------------------------------------------
-- Columns: the exact set of each table and type, then every column's type
-- ---------------------------------------------------------------------------
SELECT columns_are('runq', 'settings',
    ARRAY['singleton', 'lease', 'backoff_base', 'backoff_cap', 'stale_after', 'max_child_depth',
          'max_children']);
SELECT columns_are('runq', 'runs',
    ARRAY['run_id', 'lease_epoch', 'last_checkpoint', 'created_at', 'updated_at',
          'scheduled_for', 'ready_at', 'expires_at', 'heartbeat_at', 'lease_expires_at',
          'finished_at', 'lease', 'queue_ttl', 'attempts', 'max_attempts', 'turns',
          'tools_begun', 'priority', 'cancel_requested', 'status', 'recovery_policy',
          'tenant_id', 'session_id', 'kind', 'principal_id', 'lease_owner', 'payload',
          'result', 'failure', 'question', 'parked', 'budget', 'timeout', 'deadline', 'schedule',
          'watched', 'parent_run_id', 'spawned', 'waiting_on']);
SELECT columns_are('runq', 'run_events',
    ARRAY['run_id', 'event_id', 'epoch', 'created_at', 'type', 'payload']);
SELECT columns_are('runq', 'idempotency_keys',
    ARRAY['tenant_id', 'principal_id', 'idempotency_key', 'request_hash', 'run_id', 'created_at']);
SELECT columns_are('runq', 'checkpoints',
    ARRAY['run_id', 'seq', 'epoch', 'created_at', 'state']);
SELECT columns_are('runq', 'inputs',
    ARRAY['run_id', 'seq', 'delivered_at', 'input']);
SELECT columns_are('runq', 'tool_calls',
    ARRAY['run_id', 'call_id', 'epoch', 'started_at', 'finished_at', 'tool', 'idempotency',
          'status', 'args', 'outcome']);
SELECT columns_are('runq', 'limit_settings', ARRAY['scope', 'key', 'max_running']);
SELECT columns_are('runq', 'limit_debts', ARRAY['scope', 'key', 'debt']);
SELECT columns_are('runq', 'pause_settings', ARRAY['scope', 'key', 'reason', 'paused_at']);
SELECT columns_are('runq', 'run_usage', ARRAY['run_id', 'usage']);
SELECT columns_are('runq', 'watches', ARRAY['run_id', 'pid', 'backend_start']);
SELECT columns_are('runq', 'run_output', ARRAY['run_id', 'seq', 'epoch', 'created_at', 'chunk']);
SELECT columns_are('runq', 'model_calls', ARRAY['run_id', 'seq', 'epoch', 'applied', 'created_at',
                                                'request_hash', 'response', 'usage']);
SELECT columns_are('runq', 'spawns', ARRAY['parent_run_id', 'key', 'run_id', 'request_hash']);
-- The composite types get_run and run_events return: the contract's columns.
SELECT columns_are('runq', 'run_info',
    ARRAY['run_id', 'tenant_id', 'session_id', 'kind', 'status', 'priority', 'attempts',
          'max_attempts', 'scheduled_for', 'lease_epoch', 'cancel_requested', 'result',
          'failure', 'question', 'created_at', 'updated_at', 'finished_at', 'usage', 'budget', 'deadline',
          'parent_run_id']);
SELECT columns_are('runq', 'child_info',
    ARRAY['key', 'run_id', 'kind', 'status', 'result', 'failure', 'usage']);
SELECT columns_are('runq', 'run_event',
    ARRAY['event_id', 'epoch', 'type', 'payload', 'created_at']);

-- Type and nullability of every table column (n = NOT NULL).
CREATE TEMP TABLE expected_columns (tbl name, col name, typ text, n boolean) ON COMMIT DROP;
INSERT INTO expected_columns VALUES
    ('settings', 'singleton',        'boolean',                  true),
    ('settings', 'lease',            'interval',                 true),
    ('settings', 'backoff_base',     'interval',                 true),
    ('settings', 'backoff_cap',      'interval',                 true),
    ('settings', 'stale_after',      'interval',                 false),
    ('settings', 'max_child_depth',  'bigint',                   true),
    ('settings', 'max_children',     'bigint',                   true),
    ('runs', 'run_id',               'bigint',                   true),
    ('runs', 'lease_epoch',          'runq.epoch',                   true),
    ('runs', 'last_checkpoint',      'bigint',                   false),
    ('runs', 'created_at',           'timestamp with time zone', true),
    ('runs', 'updated_at',           'timestamp with time zone', true),
    ('runs', 'scheduled_for',        'timestamp with time zone', false),
    ('runs', 'ready_at',             'timestamp with time zone', true),
    ('runs', 'expires_at',           'timestamp with time zone', false),
    ('runs', 'heartbeat_at',         'timestamp with time zone', false),
    ('runs', 'lease_expires_at',     'timestamp with time zone', false),
    ('runs', 'finished_at',          'timestamp with time zone', false),
    ('runs', 'lease',                'runq.duration',                 false),
    ('runs', 'queue_ttl',            'runq.duration',                 false),
    ('runs', 'attempts',             'runq.counter',                  true),
    ('runs', 'max_attempts',         'runq.attempt_limit',                  true),
    ('runs', 'turns',                'runq.counter',                  true),
    ('runs', 'tools_begun',          'runq.counter',                  true),
    ('runs', 'priority',             'runq.priority_class',                 true),
    ('runs', 'cancel_requested',     'boolean',                  true),
    ('runs', 'status',               'runq.run_status',                     true),
    ('runs', 'recovery_policy',      'runq.recovery_policy',                     true),
    ('runs', 'tenant_id',            'runq.identifier',                     true),
    ('runs', 'session_id',           'runq.identifier',                     false),
    ('runs', 'kind',                 'runq.identifier',                     true),
    ('runs', 'principal_id',         'text',                     false),
    ('runs', 'lease_owner',          'text',                     false),
    ('runs', 'payload',              'runq.json_object',                    true),
    ('runs', 'result',               'jsonb',                    false),
    ('runs', 'failure',              'runq.failure_record',                    false),
    ('runs', 'question',             'jsonb',                    false),
    ('runs', 'parked',               'boolean',                  true),
    ('runs', 'budget',               'jsonb',                    false),
    ('runs', 'timeout',              'interval',                 false),
    ('runs', 'deadline',             'timestamp with time zone', false),
    ('runs', 'watched',              'boolean',                  false),
    ('runs', 'parent_run_id',        'bigint',                   false),
    ('runs', 'spawned',              'runq.counter',             false),
    ('runs', 'waiting_on',           'runq.counter',             false),
    ('run_usage', 'run_id',          'bigint',                   true),
    ('run_usage', 'usage',           'jsonb',                    true),
    ('watches', 'run_id',            'bigint',                   true),
    ('watches', 'pid',               'bigint',                   true),
    ('watches', 'backend_start',     'timestamp with time zone', true),
    ('run_output', 'run_id',         'bigint',                   true),
    ('run_output', 'seq',            'bigint',                   true),
    ('run_output', 'epoch',          'bigint',                   true),
    ('run_output', 'created_at',     'timestamp with time zone', true),
    ('run_output', 'chunk',          'jsonb',                    true),
    ('model_calls', 'run_id',        'bigint',                   true),
    ('model_calls', 'seq',           'bigint',                   true),
    ('model_calls', 'epoch',         'runq.epoch',               true),
    ('model_calls', 'applied',       'boolean',                  true),
    ('model_calls', 'created_at',    'timestamp with time zone', true),
    ('model_calls', 'request_hash',  'text',                     true),
    ('model_calls', 'response',      'jsonb',                    true),
    ('model_calls', 'usage',         'jsonb',                    false),
    ('spawns', 'parent_run_id',      'bigint',                   true),
    ('spawns', 'key',                'text',                     true),
    ('spawns', 'run_id',             'bigint',                   true),
    ('spawns', 'request_hash',       'bytea',                    true),
    ('run_events', 'run_id',         'bigint',                   true),
    ('run_events', 'event_id',       'bigint',                   true),
    ('run_events', 'epoch',          'runq.epoch',                   true),
    ('run_events', 'created_at',     'timestamp with time zone', true),
    ('run_events', 'type',           'runq.event_type',                     true),
    ('run_events', 'payload',        'runq.json_object',                    true),
    ('idempotency_keys', 'tenant_id',       'text',                     true),
    ('idempotency_keys', 'principal_id',    'text',                     false),
    ('idempotency_keys', 'idempotency_key', 'text',                     true),
    ('idempotency_keys', 'request_hash',    'bytea',                    true),
    ('idempotency_keys', 'run_id',          'bigint',                   false),
    ('idempotency_keys', 'created_at',      'timestamp with time zone', true),
    ('checkpoints', 'run_id',        'bigint',                   true),
    ('checkpoints', 'seq',           'bigint',                   true),
    ('checkpoints', 'epoch',         'bigint',                   true),
    ('checkpoints', 'created_at',    'timestamp with time zone', true),
    ('checkpoints', 'state',         'jsonb',                    true),
    ('inputs', 'run_id',             'bigint',                   true),
    ('inputs', 'seq',                'bigint',                   true),
    ('inputs', 'delivered_at',       'timestamp with time zone', true),
    ('inputs', 'input',              'jsonb',                    true),
    ('tool_calls', 'run_id',         'bigint',                   true),
    ('tool_calls', 'call_id',        'runq.identifier',                     true),
    ('tool_calls', 'epoch',          'runq.epoch',                   true),
    ('tool_calls', 'started_at',     'timestamp with time zone', true),
    ('tool_calls', 'finished_at',    'timestamp with time zone', false),
    ('tool_calls', 'tool',           'runq.identifier',                     true),
    ('tool_calls', 'idempotency',    'runq.tool_idempotency',                     true),
    ('tool_calls', 'status',         'runq.tool_call_status',                     true),
    ('tool_calls', 'args',           'runq.json_object',                    true),
    ('tool_calls', 'outcome',        'jsonb',                    false),
    ('limit_settings', 'scope',       'text',                     true),
    ('limit_settings', 'key',         'text',                     false),
    ('limit_settings', 'max_running', 'bigint',                   true),
    ('limit_debts', 'scope',         'text',                     true),
    ('limit_debts', 'key',           'text',                     true),
    ('limit_debts', 'debt',          'bigint',                   true),
    ('pause_settings', 'scope',      'text',                     true),
    ('pause_settings', 'key',        'text',                     true),
    ('pause_settings', 'reason',     'text',                     false),
    ('pause_settings', 'paused_at',  'timestamp with time zone', true);

-- 81 type tests, 81 nullability tests.
SELECT col_type_is('runq', tbl, col, typ, format('runq.%s.%s is %s', tbl, col, typ))
  FROM expected_columns ORDER BY tbl, col;
SELECT CASE WHEN n THEN col_not_null('runq', tbl, col, format('runq.%s.%s is NOT NULL', tbl, col))
            ELSE col_is_null('runq', tbl, col, format('runq.%s.%s is nullable', tbl, col)) END
  FROM expected_columns ORDER BY tbl, col;

-- The result types: priority is integer to callers, smallint in storage.
CREATE TEMP TABLE expected_type_columns (typ name, col name, coltype text) ON COMMIT DROP;
INSERT INTO expected_type_columns VALUES
    ('run_info', 'run_id',           'bigint'),
    ('run_info', 'tenant_id',        'text'),
    ('run_info', 'session_id',       'text'),
    ('run_info', 'kind',             'text'),
    ('run_info', 'status',           'text'),
    ('run_info', 'priority',         'integer'),
    ('run_info', 'attempts',         'integer'),
    ('run_info', 'max_attempts',     'integer'),
    ('run_info', 'scheduled_for',    'timestamp with time zone'),
    ('run_info', 'lease_epoch',      'bigint'),
    ('run_info', 'cancel_requested', 'boolean'),
    ('run_info', 'result',           'jsonb'),
    ('run_info', 'failure',          'jsonb'),
    ('run_info', 'question',         'jsonb'),
    ('run_info', 'created_at',       'timestamp with time zone'),
    ('run_info', 'updated_at',       'timestamp with time zone'),
    ('run_info', 'finished_at',      'timestamp with time zone'),
    ('run_info', 'usage',            'jsonb'),
    ('run_info', 'budget',           'jsonb'),
    ('run_info', 'deadline',         'timestamp with time zone'),
    ('run_event', 'event_id',        'bigint'),
    ('run_event', 'epoch',           'bigint'),
    ('run_event', 'type',            'text'),
    ('run_event', 'payload',         'jsonb'),
    ('run_event', 'created_at',      'timestamp with time zone');
-- 25 tests.
SELECT col_type_is('runq', typ, col, coltype, format('runq.%s.%s is %s', typ, col, coltype))
  FROM expected_type_columns ORDER BY typ, col;

-- Identity and generated columns.
SELECT is((SELECT a.attidentity::text FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = 'runq.runs'::regclass AND a.attname = 'run_id'),
          'a', 'runq.runs.run_id is GENERATED ALWAYS AS IDENTITY');
SELECT is((SELECT a.attidentity::text FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = 'runq.run_events'::regclass AND a.attname = 'event_id'),
          'a', 'runq.run_events.event_id is GENERATED ALWAYS AS IDENTITY');
SELECT is((SELECT a.attgenerated::text FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = 'runq.runs'::regclass AND a.attname = 'ready_at'),
          's', 'runq.runs.ready_at is a stored generated column');
-- A run is admitted unless a limit or a pause parks it: the constant default
-- (stored in the catalog, so adding the column rewrote no row).
SELECT col_default_is('runq', 'runs', 'parked', 'false', 'runq.runs.parked defaults to false');

-- ---------------------------------------------------------------------------
-- Keys and constraints by name
-- ---------------------------------------------------------------------------
SELECT col_is_pk('runq', 'settings', 'singleton', 'settings is keyed by singleton');
SELECT col_is_pk('runq', 'runs', 'run_id', 'runs is keyed by run_id');
SELECT col_is_pk('runq', 'run_events', ARRAY['run_id', 'event_id'], 'run_events is keyed by (run_id, event_id)');
SELECT col_is_pk('runq', 'checkpoints', ARRAY['run_id', 'seq'], 'checkpoints is keyed by (run_id, seq)');
SELECT col_is_pk('runq', 'inputs', ARRAY['run_id', 'seq'], 'inputs is keyed by (run_id, seq)');
SELECT col_is_pk('runq', 'tool_calls', ARRAY['run_id', 'call_id'], 'tool_calls is keyed by (run_id, call_id)');
SELECT col_is_unique('runq', 'idempotency_keys', ARRAY['tenant_id', 'principal_id', 'idempotency_key'],
                     'idempotency keys are unique per (tenant_id, principal_id, idempotency_key)');
-- key NULL is the default row of a scope, so no primary key: a unique
-- constraint with NULLS NOT DISTINCT (its index definition below).
SELECT hasnt_pk('runq', 'limit_settings', 'limit_settings has no primary key (key NULL is the default row)');
SELECT col_is_unique('runq', 'limit_settings', ARRAY['scope', 'key'],
                     'limit settings are unique per (scope, key)');
SELECT col_is_pk('runq', 'limit_debts', ARRAY['scope', 'key'], 'limit_debts is keyed by (scope, key)');
SELECT col_is_pk('runq', 'pause_settings', ARRAY['scope', 'key'], 'pause_settings is keyed by (scope, key)');
SELECT col_is_pk('runq', 'run_usage', 'run_id', 'run_usage is keyed by run_id: one row of totals a run');

SELECT fk_ok('runq', 'idempotency_keys', 'run_id', 'runq', 'runs', 'run_id');
SELECT fk_ok('runq', 'checkpoints', 'run_id', 'runq', 'runs', 'run_id');
SELECT fk_ok('runq', 'inputs', 'run_id', 'runq', 'runs', 'run_id');
SELECT fk_ok('runq', 'tool_calls', 'run_id', 'runq', 'runs', 'run_id');
SELECT fk_ok('runq', 'run_usage', 'run_id', 'runq', 'runs', 'run_id');
SELECT is((SELECT c.confdeltype::text FROM pg_catalog.pg_constraint AS c
            WHERE c.conrelid = 'runq.run_usage'::regclass AND c.contype = 'f'),
          'c', 'a run''s usage totals go with it (ON DELETE CASCADE): a purge cannot miss one recorded meanwhile');
SELECT hasnt_fk('runq', 'run_events', 'run_events has no foreign key (no RI check on the hot path)');
SELECT fk_ok('runq', 'spawns', 'parent_run_id', 'runq', 'runs', 'run_id');
SELECT is((SELECT array_agg(c.confdeltype::text) FROM pg_catalog.pg_constraint AS c
            WHERE c.conrelid = 'runq.spawns'::regclass AND c.contype = 'f'),
          ARRAY['c'], 'a parent''s keys go with it (ON DELETE CASCADE), and a child is no foreign key: a purged child keeps its key used');

-- The exact set of CHECK constraints of each table.
SELECT is(
    (SELECT coalesce(array_agg(c.conname::text ORDER BY c.conname::text), ARRAY[]::text[])
       FROM pg_catalog.pg_constraint AS c
      WHERE c.conrelid = to_regclass(format('runq.%I', tbl)) AND c.contype = 'c'),
    checks,
    format('runq.%s has exactly its CHECK constraints', tbl))
  FROM (VALUES
    ('settings', ARRAY['settings_backoff_base_check', 'settings_check', 'settings_lease_check',
                       'settings_max_child_depth_check', 'settings_max_children_check',
                       'settings_singleton_check', 'settings_stale_after_check']),
    ('runs', ARRAY['runs_shape_consistent']),
    ('run_events', ARRAY[]::text[]),
    ('idempotency_keys', ARRAY['idempotency_keys_idempotency_key_check']),
    ('checkpoints', ARRAY[]::text[]),
    ('inputs', ARRAY[]::text[]),
    ('tool_calls', ARRAY['tool_calls_finished_iff_outcome',
                         'tool_calls_uncertain_only_non_idempotent']),
    ('limit_settings', ARRAY['limit_settings_max_running_check', 'limit_settings_scope_check']),
    ('limit_debts', ARRAY['limit_debts_debt_check', 'limit_debts_scope_check']),
    ('pause_settings', ARRAY['pause_settings_scope_check']),
    ('run_usage', ARRAY[]::text[]),
    ('watches', ARRAY[]::text[]),
    ('run_output', ARRAY[]::text[]),
    ('model_calls', ARRAY['model_calls_request_hash_check', 'model_calls_seq_check']),
    ('spawns', ARRAY['spawns_key_check'])
  ) AS v(tbl, checks);
-- runs' one CHECK casts each row's shape to a domain that carries the five
-- run-state invariants (a domain's constraints are cached per session; a
-- table CHECK is rebuilt by every UPDATE).
SELECT is(
    (SELECT array_agg(c.conname::text ORDER BY c.conname::text)
       FROM pg_catalog.pg_constraint AS c
      WHERE c.contypid = 'runq.consistent_run_shape'::regtype),
    ARRAY['runs_expires_with_ttl', 'runs_failure_iff_failed', 'runs_finished_iff_terminal',
          'runs_leased_iff_running', 'runs_question_iff_waiting'],
    'runq.consistent_run_shape carries the five run-state invariants');

-- ---------------------------------------------------------------------------
-- Indexes: the exact set per table, then each definition (columns, uniqueness,
-- predicate) as designed for the hot path
-- ---------------------------------------------------------------------------
SELECT indexes_are('runq', 'settings', ARRAY['settings_pkey']);
SELECT indexes_are('runq', 'runs',
    ARRAY['runs_pkey', 'runs_session_active_key',
          'runs_held_idx', 'runs_queue_expiry_idx', 'runs_dead_letter_idx',
          'runs_claimable_idx', 'runs_claimable_kind_idx', 'runs_queued_tenant_idx',
          'runs_queued_kind_idx', 'runs_running_tenant_idx', 'runs_running_kind_idx',
          'runs_parked_idx', 'runs_deadline_idx', 'runs_schedule_active_key',
          'runs_list_tenant_idx', 'runs_list_kind_idx']);
SELECT indexes_are('runq', 'run_events', ARRAY['run_events_pkey', 'run_events_fenced_key', 'run_events_usage_idx',
                                           'run_events_created_idx', 'run_events_requeued_idx']);
SELECT indexes_are('runq', 'idempotency_keys', ARRAY['idempotency_keys_scope_key', 'idempotency_keys_run_idx']);
SELECT indexes_are('runq', 'checkpoints', ARRAY['checkpoints_pkey']);
SELECT indexes_are('runq', 'inputs', ARRAY['inputs_pkey']);
SELECT indexes_are('runq', 'tool_calls', ARRAY['tool_calls_pkey']);
SELECT indexes_are('runq', 'limit_settings', ARRAY['limit_settings_key']);
SELECT indexes_are('runq', 'limit_debts', ARRAY['limit_debts_pkey']);
SELECT indexes_are('runq', 'pause_settings', ARRAY['pause_settings_pkey']);
SELECT indexes_are('runq', 'run_usage', ARRAY['run_usage_pkey']);
SELECT indexes_are('runq', 'watches', ARRAY['watches_pkey']);
-- The output's key is its only index: a reader reads a range of it, and a
-- chunk costs one index entry.
SELECT indexes_are('runq', 'run_output', ARRAY['run_output_pkey']);
-- The journal's key, and the one applied row a request may have.
SELECT indexes_are('runq', 'model_calls', ARRAY['model_calls_pkey', 'model_calls_applied_key']);
-- A parent's children by key: its key is its only index.
SELECT indexes_are('runq', 'spawns', ARRAY['spawns_pkey']);

SELECT is(pg_catalog.pg_get_indexdef(to_regclass(format('runq.%I', idx))), def, idx || ' is defined as designed')
  FROM (VALUES
    ('runs_session_active_key',
     'CREATE UNIQUE INDEX runs_session_active_key ON runq.runs USING btree (tenant_id, session_id) WHERE (((status)::text = ANY (ARRAY[''queued''::text, ''running''::text, ''waiting_for_user''::text, ''waiting_for_children''::text])) AND (session_id IS NOT NULL))'),
    ('runs_schedule_active_key',
     'CREATE UNIQUE INDEX runs_schedule_active_key ON runq.runs USING btree (schedule) WHERE ((schedule IS NOT NULL) AND ((status)::text = ANY (ARRAY[''queued''::text, ''running''::text, ''waiting_for_user''::text, ''waiting_for_children''::text])))'),
    ('runs_held_idx',
     'CREATE INDEX runs_held_idx ON runq.runs USING btree (run_id) WHERE ((status)::text = ANY (ARRAY[''running''::text, ''waiting_for_user''::text, ''waiting_for_children''::text]))'),
    ('runs_queue_expiry_idx',
     'CREATE INDEX runs_queue_expiry_idx ON runq.runs USING btree (expires_at) WHERE (((status)::text = ''queued''::text) AND (expires_at IS NOT NULL))'),
    ('runs_dead_letter_idx',
     'CREATE INDEX runs_dead_letter_idx ON runq.runs USING btree (priority, finished_at) WHERE ((status)::text = ''failed''::text)'),
    -- What claim walks: the queued runs by class (and kind) and age, but the parked ones.
    ('runs_claimable_idx',
     'CREATE INDEX runs_claimable_idx ON runq.runs USING btree (priority, ready_at, run_id) WHERE (((status)::text = ''queued''::text) AND (NOT parked))'),
    ('runs_claimable_kind_idx',
     'CREATE INDEX runs_claimable_kind_idx ON runq.runs USING btree (priority, kind, ready_at, run_id) WHERE (((status)::text = ''queued''::text) AND (NOT parked))'),
    -- A tenant's (kind's) admitted queued runs, then its parked ones in claim order.
    ('runs_queued_tenant_idx',
     'CREATE INDEX runs_queued_tenant_idx ON runq.runs USING btree (parked, tenant_id, priority, ready_at, run_id) WHERE ((status)::text = ''queued''::text)'),
    ('runs_queued_kind_idx',
     'CREATE INDEX runs_queued_kind_idx ON runq.runs USING btree (parked, kind, priority, ready_at, run_id) WHERE ((status)::text = ''queued''::text)'),
    -- The running runs a limit counts: lease, not lease_expires_at (HOT heartbeats).
    ('runs_running_tenant_idx',
     'CREATE INDEX runs_running_tenant_idx ON runq.runs USING btree (tenant_id) WHERE (((status)::text = ''running''::text) AND (lease IS NOT NULL))'),
    ('runs_running_kind_idx',
     'CREATE INDEX runs_running_kind_idx ON runq.runs USING btree (kind) WHERE (((status)::text = ''running''::text) AND (lease IS NOT NULL))'),
    -- The parked runs of each class, tenant by tenant.
    ('runs_parked_idx',
     'CREATE INDEX runs_parked_idx ON runq.runs USING btree (priority, tenant_id, ready_at, run_id) WHERE (((status)::text = ''queued''::text) AND parked)'),
    -- The sweep's head of the runs with a deadline that are not yet terminal.
    ('runs_deadline_idx',
     'CREATE INDEX runs_deadline_idx ON runq.runs USING btree (deadline) WHERE ((deadline IS NOT NULL) AND ((status)::text = ANY (ARRAY[''queued''::text, ''waiting_for_user''::text, ''waiting_for_children''::text])))'),
    -- The usage ledger by time, for usage_report.
    ('run_events_usage_idx',
     'CREATE INDEX run_events_usage_idx ON runq.run_events USING btree (created_at, run_id) WHERE ((type)::text = ''run.usage''::text)'),
    -- What list_runs reads: every run but the running ones (a claim writes no entry).
    ('runs_list_tenant_idx',
     'CREATE INDEX runs_list_tenant_idx ON runq.runs USING btree (tenant_id, kind, status, run_id) WHERE ((status)::text <> ''running''::text)'),
    ('runs_list_kind_idx',
     'CREATE INDEX runs_list_kind_idx ON runq.runs USING btree (kind, status, run_id) WHERE ((status)::text <> ''running''::text)'),
    -- The event log by time (BRIN: the tail's inserts write nothing), for throughput.
    ('run_events_created_idx',
     'CREATE INDEX run_events_created_idx ON runq.run_events USING brin (created_at) WITH (pages_per_range=''32'')'),
    -- The requeues, counted by recovery_totals.
    ('run_events_requeued_idx',
     'CREATE INDEX run_events_requeued_idx ON runq.run_events USING btree (run_id) WHERE (((type)::text = ''run.requeued''::text) AND (((payload)::jsonb ->> ''reason''::text) = ''lease_expired''::text))'),
    ('limit_settings_key',
     'CREATE UNIQUE INDEX limit_settings_key ON runq.limit_settings USING btree (scope, key) NULLS NOT DISTINCT'),
    ('run_events_fenced_key',
     'CREATE UNIQUE INDEX run_events_fenced_key ON runq.run_events USING btree (run_id, epoch) WHERE ((type)::text = ''run.fenced''::text)'),
    ('idempotency_keys_scope_key',
     'CREATE UNIQUE INDEX idempotency_keys_scope_key ON runq.idempotency_keys USING btree (tenant_id, principal_id, idempotency_key) NULLS NOT DISTINCT'),
    ('idempotency_keys_run_idx',
     'CREATE INDEX idempotency_keys_run_idx ON runq.idempotency_keys USING btree (run_id)')
  ) AS v(idx, def);

-- A heartbeat writes only heartbeat_at and lease_expires_at: no index may
-- cover them, or heartbeats stop being HOT updates.
SELECT is((SELECT count(*)::int FROM pg_catalog.pg_index AS i
             JOIN pg_catalog.pg_attribute AS a
               ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
            WHERE i.indrelid = 'runq.runs'::regclass
              AND a.attname IN ('heartbeat_at', 'lease_expires_at', 'updated_at')),
          0, 'no index on runs covers heartbeat_at, lease_expires_at or updated_at (HOT heartbeats)');

-- ---------------------------------------------------------------------------
-- Triggers: the exact set in the schema (every entry into the queue is
-- admitted or parked, every slot left is handed on)
-- ---------------------------------------------------------------------------
SELECT is(ARRAY(SELECT c.relname::text || '.' || t.tgname::text
                  FROM pg_catalog.pg_trigger AS t
                  JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid
                 WHERE c.relnamespace = 'runq'::regnamespace AND NOT t.tgisinternal
                 ORDER BY 1),
          ARRAY['runs.runs_admit_new', 'runs.runs_wake'],
          'runq has two triggers: the admission of new runs and their wake-up');

-- ---------------------------------------------------------------------------
-- settings: one row, the contract's defaults
-- ---------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM runq.settings), 1, 'settings holds exactly one row');
SELECT is((SELECT backoff_base FROM runq.settings), interval '1 second', 'default backoff base is 1 s');
SELECT is((SELECT backoff_cap FROM runq.settings), interval '5 minutes', 'default backoff cap is 5 min');
SELECT ok((SELECT lease > interval '0' FROM runq.settings), 'default lease is positive');
SELECT is((SELECT stale_after FROM runq.settings), NULL::interval, 'stale_after is NULL by default (derived)');
SELECT throws_ok('INSERT INTO runq.settings DEFAULT VALUES', '23505', NULL,
                 'a second settings row is rejected');
SELECT throws_ok('INSERT INTO runq.settings (singleton) VALUES (false)', '23514', NULL,
                 'a settings row with singleton false is rejected');
SELECT throws_ok($$UPDATE runq.settings SET lease = interval '0'$$, '23514', NULL,
                 'a zero lease setting is rejected');
SELECT throws_ok($$UPDATE runq.settings SET backoff_base = interval '0'$$, '23514', NULL,
                 'a zero backoff base is rejected');
SELECT throws_ok($$UPDATE runq.settings SET backoff_cap = interval '1 millisecond'$$, '23514', NULL,
                 'a backoff cap below the base is rejected');
SELECT throws_ok($$UPDATE runq.settings SET stale_after = interval '-1 second'$$, '23514', NULL,
                 'a negative stale_after is rejected');

-- ---------------------------------------------------------------------------
-- runs: defaults and generated columns
-- ---------------------------------------------------------------------------
INSERT INTO runq.runs (tenant_id, kind, priority, created_at, updated_at)
VALUES ('schema-t', 'k', 10, now(), now())
RETURNING run_id AS base_run \gset

SELECT results_eq(
    format($$SELECT lease_epoch::bigint, attempts::int, max_attempts::int, turns::int,
                    tools_begun::int, cancel_requested, status::text, recovery_policy::text,
                    payload::jsonb, ready_at = created_at
               FROM runq.runs WHERE run_id = %s$$, :base_run),
    $$VALUES (0::bigint, 0, 3, 0, 0, false, 'queued'::text, 'resume'::text, '{}'::jsonb, true)$$,
    'a minimal run defaults to epoch 0, no attempts, max_attempts 3, queued, resume, {} and ready at creation');

SELECT is((SELECT ready_at FROM runq.runs WHERE run_id = :base_run), now(),
          'ready_at is created_at without scheduled_for');
UPDATE runq.runs SET scheduled_for = now() + interval '1 hour' WHERE run_id = :base_run;
SELECT is((SELECT ready_at FROM runq.runs WHERE run_id = :base_run), now() + interval '1 hour',
          'ready_at follows scheduled_for');
SELECT throws_ok(format('UPDATE runq.runs SET ready_at = now() WHERE run_id = %s', :base_run),
                 '428C9', NULL, 'ready_at cannot be written');
SELECT throws_ok($$INSERT INTO runq.runs (run_id, tenant_id, kind, priority, created_at, updated_at)
                   VALUES (-1, 'schema-t', 'k', 10, now(), now())$$,
                 '428C9', NULL, 'run_id cannot be chosen by the writer');

-- ---------------------------------------------------------------------------
-- runs: CHECK constraints reject what they must, accept the boundaries
-- ---------------------------------------------------------------------------
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, max_attempts, created_at, updated_at)
                  VALUES ('schema-t', 'k', 0, 1, now(), now()),
                         ('schema-t', 'k', 32767, 1, now(), now())$$,
                'priority 0 and 32767 and max_attempts 1 are accepted');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, created_at, updated_at)
                   VALUES ('schema-t', 'k', -1, now(), now())$$,
                 '23514', NULL, 'priority -1 is rejected by a CHECK');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, created_at, updated_at)
                   VALUES ('schema-t', 'k', 32768, now(), now())$$,
                 '22003', NULL, 'priority 32768 is out of the smallint range');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, max_attempts, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 0, now(), now())$$,
                 '23514', NULL, 'max_attempts 0 is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'paused', now(), now())$$,
                 '23514', NULL, 'an unknown status is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, recovery_policy, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'retry', now(), now())$$,
                 '23514', NULL, 'an unknown recovery policy is rejected');
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, recovery_policy, created_at, updated_at)
                  VALUES ('schema-t', 'k', 10, 'fail', now(), now()),
                         ('schema-t', 'k', 10, 'zero_work', now(), now())$$,
                'recovery policies fail and zero_work are accepted');
SELECT throws_ok(format('UPDATE runq.runs SET attempts = -1 WHERE run_id = %s', :base_run),
                 '23514', NULL, 'negative attempts are rejected');
SELECT throws_ok(format('UPDATE runq.runs SET lease_epoch = -1 WHERE run_id = %s', :base_run),
                 '23514', NULL, 'a negative lease_epoch is rejected');
SELECT throws_ok(format('UPDATE runq.runs SET turns = -1 WHERE run_id = %s', :base_run),
                 '23514', NULL, 'negative turns are rejected');
SELECT throws_ok(format('UPDATE runq.runs SET tools_begun = -1 WHERE run_id = %s', :base_run),
                 '23514', NULL, 'negative tools_begun is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, created_at, updated_at)
                   VALUES ('', 'k', 10, now(), now())$$,
                 '23514', NULL, 'an empty tenant_id is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
                   VALUES ('schema-t', '', 'k', 10, now(), now())$$,
                 '23514', NULL, 'an empty session_id is rejected (NULL means no session)');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, created_at, updated_at)
                   VALUES ('schema-t', '', 10, now(), now())$$,
                 '23514', NULL, 'an empty kind is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, payload, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, '[1]', now(), now())$$,
                 '23514', NULL, 'a non-object payload is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, queue_ttl, expires_at, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, interval '0', now(), now(), now())$$,
                 '23514', NULL, 'a zero queue_ttl is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, queue_ttl, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, interval '1 hour', now(), now())$$,
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_expires_with_ttl"',
                 'a queue_ttl without expires_at is rejected');
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, queue_ttl, expires_at, created_at, updated_at)
                  VALUES ('schema-t', 'k', 10, interval '1 hour', now() + interval '1 hour', now(), now())$$,
                'a queue_ttl with its expires_at is accepted');

-- budget, timeout: plain columns (a new column of a domain with a CHECK
-- would have rewritten runs); their rules, and those of the usage totals,
-- are submit's, set_budget's and record_usage's (25_usage_budget.sql).
-- Totals are never NULL, and only of a run.
SELECT lives_ok(format($$UPDATE runq.runs SET budget = '{"cost_usd": 2.00, "tokens": 0}', timeout = interval '1 hour',
                                              deadline = created_at + interval '1 hour'
                          WHERE run_id = %s$$, :base_run),
                'a budget and a timeout with its deadline are stored');
SELECT lives_ok(format($$INSERT INTO runq.run_usage VALUES (%s, '{"tokens": 12, "cost_usd": 0.5}')$$, :base_run),
                'usage totals are stored');
SELECT throws_ok(format($$UPDATE runq.run_usage SET usage = NULL WHERE run_id = %s$$, :base_run),
                 '23502', NULL, 'NULL usage totals are rejected');
SELECT throws_ok($$INSERT INTO runq.run_usage VALUES (-1, '{"tokens": 1}')$$,
                 '23503', NULL, 'usage totals of no run are rejected');
UPDATE runq.runs SET budget = NULL, timeout = NULL, deadline = NULL WHERE run_id = :base_run;
DELETE FROM runq.run_usage WHERE run_id = :base_run;

-- The state invariants.
SELECT throws_ok(format('UPDATE runq.runs SET status = ''running'' WHERE run_id = %s', :base_run),
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_leased_iff_running"',
                 'running without a lease is rejected');
SELECT throws_ok(format($$UPDATE runq.runs SET status = 'running', lease = interval '0',
                          lease_expires_at = now() WHERE run_id = %s$$, :base_run),
                 '23514', NULL, 'a zero lease is rejected');
SELECT throws_ok(format($$UPDATE runq.runs SET lease = interval '30 seconds',
                          lease_expires_at = now() WHERE run_id = %s$$, :base_run),
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_leased_iff_running"',
                 'a queued run holding a lease is rejected');
SELECT lives_ok(format($$UPDATE runq.runs SET status = 'running', lease = interval '30 seconds',
                         lease_expires_at = now() + interval '30 seconds' WHERE run_id = %s$$, :base_run),
                'running with a lease is accepted');
SELECT throws_ok(format($$UPDATE runq.runs SET status = 'succeeded', lease = NULL,
                          lease_expires_at = NULL WHERE run_id = %s$$, :base_run),
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_finished_iff_terminal"',
                 'a terminal run without finished_at is rejected');
SELECT throws_ok(format($$UPDATE runq.runs SET finished_at = now() WHERE run_id = %s$$, :base_run),
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_finished_iff_terminal"',
                 'a non-terminal run with finished_at is rejected');
SELECT throws_ok(format($$UPDATE runq.runs SET failure = '{"code": "x", "message": "x"}' WHERE run_id = %s$$, :base_run),
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_failure_iff_failed"',
                 'a failure on a run that is not failed is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, finished_at, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'failed', now(), now(), now())$$,
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_failure_iff_failed"',
                 'a failed run without failure is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, finished_at, failure, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'failed', now(), '{"code": "x"}', now(), now())$$,
                 '23514', NULL, 'a failure without message is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, finished_at, failure, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'failed', now(), '{"message": "x"}', now(), now())$$,
                 '23514', NULL, 'a failure without code is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, finished_at, failure, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'failed', now(), '{"code": 1, "message": "x"}', now(), now())$$,
                 '23514', NULL, 'a failure with a non-string code is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, finished_at, failure, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'failed', now(), '"boom"', now(), now())$$,
                 '23514', NULL, 'a non-object failure is rejected');
SELECT lives_ok(format($$UPDATE runq.runs SET status = 'failed', lease = NULL, lease_expires_at = NULL,
                         finished_at = now(), failure = '{"code": "x", "message": "x"}' WHERE run_id = %s$$, :base_run),
                'a failed run with a code and a message is accepted');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, status, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, 'waiting_for_user', now(), now())$$,
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_question_iff_waiting"',
                 'waiting_for_user without a question is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, kind, priority, question, created_at, updated_at)
                   VALUES ('schema-t', 'k', 10, '{"q": 1}', now(), now())$$,
                 '23514',
                 'value for domain runq.consistent_run_shape violates check constraint "runs_question_iff_waiting"',
                 'a question on a run that is not waiting is rejected');

-- ---------------------------------------------------------------------------
-- runs: one non-terminal run per (tenant_id, session_id)
-- ---------------------------------------------------------------------------
INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
VALUES ('schema-t', 's1', 'k', 10, now(), now())
RETURNING run_id AS first_run \gset

SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
                   VALUES ('schema-t', 's1', 'k', 10, now(), now())$$,
                 '23505', NULL, 'a second queued run in a session with a queued run is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, status, lease,
                                         lease_expires_at, created_at, updated_at)
                   VALUES ('schema-t', 's1', 'k', 10, 'running', interval '30 seconds',
                           now() + interval '30 seconds', now(), now())$$,
                 '23505', NULL, 'a running run in a session with a queued run is rejected');
SELECT throws_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, status, question,
                                         created_at, updated_at)
                   VALUES ('schema-t', 's1', 'k', 10, 'waiting_for_user', '{"q": 1}', now(), now())$$,
                 '23505', NULL, 'a waiting run in a session with a queued run is rejected');
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, status, finished_at,
                                        created_at, updated_at)
                  VALUES ('schema-t', 's1', 'k', 10, 'succeeded', now(), now(), now()),
                         ('schema-t', 's1', 'k', 10, 'cancelled', now(), now(), now())$$,
                'terminal runs do not take the session slot');
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
                  VALUES ('schema-t2', 's1', 'k', 10, now(), now())$$,
                'the same session id in another tenant is another session');
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
                  VALUES ('schema-t', NULL, 'k', 10, now(), now()),
                         ('schema-t', NULL, 'k', 10, now(), now()),
                         ('schema-t', NULL, 'k', 10, now(), now())$$,
                'NULL sessions never conflict');

UPDATE runq.runs SET status = 'succeeded', finished_at = now() WHERE run_id = :first_run;
SELECT lives_ok($$INSERT INTO runq.runs (tenant_id, session_id, kind, priority, created_at, updated_at)
                  VALUES ('schema-t', 's1', 'k', 10, now(), now())$$,
                'once the active run is terminal, the session accepts a new run');
SELECT throws_ok(format($$UPDATE runq.runs SET status = 'queued', finished_at = NULL WHERE run_id = %s$$,
                        :first_run),
                 '23505', NULL, 'a terminal run cannot become active again while another run holds the session');
SELECT is((SELECT count(*)::int FROM runq.runs
            WHERE tenant_id = 'schema-t' AND session_id = 's1'
              AND status IN ('queued', 'running', 'waiting_for_user')),
          1, 'the session holds exactly one non-terminal run');

-- ---------------------------------------------------------------------------
-- run_events
-- ---------------------------------------------------------------------------
SELECT lives_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type)
                         VALUES (%1$s, 1, now(), 'run.claimed'), (%1$s, 1, now(), 'run.claimed'),
                                (%1$s, 1, now(), 'run.fenced'), (%1$s, 2, now(), 'run.fenced')$$,
                       :base_run),
                'events repeat freely; run.fenced once per epoch');
SELECT throws_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type)
                          VALUES (%s, 1, now(), 'run.fenced')$$, :base_run),
                 '23505', NULL, 'a second run.fenced for one run and epoch is rejected');
SELECT throws_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type)
                          VALUES (%s, 1, now(), 'run.exploded')$$, :base_run),
                 '23514', NULL, 'an unknown event type is rejected');
SELECT throws_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type)
                          VALUES (%s, -1, now(), 'run.claimed')$$, :base_run),
                 '23514', NULL, 'a negative event epoch is rejected');
SELECT throws_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type, payload)
                          VALUES (%s, 1, now(), 'run.claimed', '[]')$$, :base_run),
                 '23514', NULL, 'a non-object event payload is rejected');
SELECT lives_ok(format($$INSERT INTO runq.run_events (run_id, epoch, created_at, type)
                         SELECT %s, 0, now(), t
                           FROM unnest(ARRAY['run.created', 'run.claimed', 'run.checkpointed',
                                 'run.turn_started', 'run.tool_started', 'run.tool_finished',
                                 'run.tool_uncertain', 'run.waiting_for_user', 'run.input_delivered',
                                 'run.succeeded', 'run.failed', 'run.cancel_requested', 'run.cancelled',
                                 'run.requeued', 'run.fenced', 'run.redriven', 'run.usage']) AS t$$, :first_run),
                'every event type of the contract is accepted');

-- ---------------------------------------------------------------------------
-- idempotency_keys
-- ---------------------------------------------------------------------------
SELECT lives_ok(format($$INSERT INTO runq.idempotency_keys
                            (tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at)
                         VALUES ('schema-t', NULL, 'key-1', '\x00', %1$s, now()),
                                ('schema-t', 'alice', 'key-1', '\x00', %1$s, now()),
                                ('schema-t2', NULL, 'key-1', '\x00', %1$s, now())$$, :base_run),
                'one key in other principals and tenants is another key');
SELECT throws_ok(format($$INSERT INTO runq.idempotency_keys
                             (tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at)
                          VALUES ('schema-t', NULL, 'key-1', '\x01', %s, now())$$, :base_run),
                 '23505', NULL, 'a key is unique per tenant with a NULL principal too (NULLS NOT DISTINCT)');
SELECT throws_ok(format($$INSERT INTO runq.idempotency_keys
                             (tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at)
                          VALUES ('schema-t', 'alice', 'key-1', '\x01', %s, now())$$, :base_run),
                 '23505', NULL, 'a key is unique per (tenant, principal)');
SELECT throws_ok($$INSERT INTO runq.idempotency_keys
                     (tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at)
                   VALUES ('schema-t', NULL, '', '\x00', NULL, now())$$,
                 '23514', NULL, 'an empty idempotency key is rejected');
SELECT throws_ok($$INSERT INTO runq.idempotency_keys
                     (tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at)
                   VALUES ('schema-t', NULL, 'key-2', '\x00', -1, now())$$,
                 '23503', NULL, 'an idempotency key for a run that does not exist is rejected');

-- ---------------------------------------------------------------------------
-- checkpoints, inputs, tool_calls
-- ---------------------------------------------------------------------------
SELECT throws_ok($$INSERT INTO runq.checkpoints (run_id, epoch, created_at, state)
                   VALUES (-1, 1, now(), '{}')$$,
                 '23503', NULL, 'a checkpoint of a run that does not exist is rejected');
SELECT throws_ok($$INSERT INTO runq.inputs (run_id, delivered_at, input) VALUES (-1, now(), '{}')$$,
                 '23503', NULL, 'an input to a run that does not exist is rejected');
WITH c1 AS (INSERT INTO runq.checkpoints (run_id, epoch, created_at, state)
            VALUES (:base_run, 1, now(), '{}') RETURNING seq)
SELECT ok(nextval('runq.progress_seq') = c1.seq + 1,
          'checkpoints draw their order from the shared progress sequence')
  FROM c1;

SELECT lives_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                         VALUES (%1$s, 'c1', 1, now(), 'search', 'read_only'),
                                (%1$s, 'c2', 1, now(), 'upsert', 'idempotent'),
                                (%1$s, 'c3', 1, now(), 'charge', 'non_idempotent')$$, :base_run),
                'tool calls of the three idempotency classes are accepted');
SELECT is((SELECT array_agg(status || ' ' || args::text ORDER BY call_id) FROM runq.tool_calls
            WHERE run_id = :base_run),
          ARRAY['started {}', 'started {}', 'started {}'], 'a tool call starts as started with args {}');
SELECT throws_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                          VALUES (%s, 'c1', 2, now(), 'search', 'read_only')$$, :base_run),
                 '23505', NULL, 'a call_id is unique within its run');
SELECT throws_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                          VALUES (%s, 'c9', 1, now(), 'search', 'maybe')$$, :base_run),
                 '23514', NULL, 'an unknown idempotency class is rejected');
SELECT throws_ok(format($$UPDATE runq.tool_calls SET status = 'lost' WHERE run_id = %s AND call_id = 'c1'$$,
                        :base_run),
                 '23514', NULL, 'an unknown tool call status is rejected');
SELECT throws_ok(format($$UPDATE runq.tool_calls SET status = 'uncertain' WHERE run_id = %s AND call_id = 'c2'$$,
                        :base_run),
                 '23514', NULL, 'only a non_idempotent call can be uncertain');
SELECT lives_ok(format($$UPDATE runq.tool_calls SET status = 'uncertain' WHERE run_id = %1$s AND call_id = 'c3';
                         UPDATE runq.tool_calls SET status = 'retryable' WHERE run_id = %1$s AND call_id = 'c2'$$,
                       :base_run),
                'a non_idempotent call can be uncertain, an idempotent one retryable');
SELECT throws_ok(format($$UPDATE runq.tool_calls SET status = 'finished' WHERE run_id = %s AND call_id = 'c1'$$,
                        :base_run),
                 '23514', NULL, 'a finished call without outcome and finished_at is rejected');
SELECT throws_ok(format($$UPDATE runq.tool_calls SET outcome = '{}', finished_at = now()
                           WHERE run_id = %s AND call_id = 'c1'$$, :base_run),
                 '23514', NULL, 'a started call with an outcome is rejected');
SELECT lives_ok(format($$UPDATE runq.tool_calls SET status = 'finished', outcome = '{}', finished_at = now()
                          WHERE run_id = %s AND call_id = 'c1'$$, :base_run),
                'a finished call with its outcome is accepted');
SELECT throws_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency, args)
                          VALUES (%s, 'c9', 1, now(), 'search', 'read_only', '"x"')$$, :base_run),
                 '23514', NULL, 'non-object tool args are rejected');
SELECT throws_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                          VALUES (%s, '', 1, now(), 'search', 'read_only')$$, :base_run),
                 '23514', NULL, 'an empty call_id is rejected');
SELECT throws_ok(format($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                          VALUES (%s, 'c9', 1, now(), '', 'read_only')$$, :base_run),
                 '23514', NULL, 'an empty tool name is rejected');
SELECT throws_ok($$INSERT INTO runq.tool_calls (run_id, call_id, epoch, started_at, tool, idempotency)
                   VALUES (-1, 'c1', 1, now(), 'search', 'read_only')$$,
                 '23503', NULL, 'a tool call of a run that does not exist is rejected');

-- ---------------------------------------------------------------------------
-- limit_settings, limit_debts, pause_settings (last: a limit or a pause
-- written here would park the runs inserted after it)
-- ---------------------------------------------------------------------------
SELECT lives_ok($$INSERT INTO runq.limit_settings (scope, key, max_running)
                  VALUES ('tenant', 'schema-lim', 1), ('kind', 'schema-lim', 2),
                         ('tenant', NULL, 5), ('kind', NULL, 5)$$,
                'one key in both scopes, and a default (key NULL) of each scope, are accepted; max_running 1 too');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES ('tenant', NULL, 3)$$,
                 '23505', NULL, 'a second default of a scope is rejected (NULLS NOT DISTINCT)');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES ('tenant', 'schema-lim', 3)$$,
                 '23505', NULL, 'a second limit for one (scope, key) is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES ('class', 'schema-lim2', 1)$$,
                 '23514', NULL, 'a limit scope other than tenant or kind is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES (NULL, 'schema-lim2', 1)$$,
                 '23502', NULL, 'a NULL limit scope is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES ('tenant', 'schema-lim2', 0)$$,
                 '23514', NULL, 'max_running 0 is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_settings (scope, key, max_running) VALUES ('tenant', 'schema-lim2', NULL)$$,
                 '23502', NULL, 'a NULL max_running is rejected (NULL removes the row through set_limit)');

SELECT lives_ok($$INSERT INTO runq.limit_debts (scope, key, debt)
                  VALUES ('tenant', 'schema-lim', 1), ('kind', 'schema-lim', 1)$$,
                'a debt of 1 of one key in both scopes is accepted');
SELECT throws_ok($$INSERT INTO runq.limit_debts (scope, key, debt) VALUES ('tenant', 'schema-lim', 2)$$,
                 '23505', NULL, 'a second debt for one (scope, key) is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_debts (scope, key, debt) VALUES ('class', 'schema-lim2', 1)$$,
                 '23514', NULL, 'a debt scope other than tenant or kind is rejected');
SELECT throws_ok($$INSERT INTO runq.limit_debts (scope, key, debt) VALUES ('tenant', 'schema-lim2', 0)$$,
                 '23514', NULL, 'a debt of 0 is rejected (a key that owes nothing has no row)');
SELECT throws_ok($$INSERT INTO runq.limit_debts (scope, key, debt) VALUES ('tenant', NULL, 1)$$,
                 '23502', NULL, 'a debt of a NULL key is rejected (a default owes nothing; its keys do)');

SELECT lives_ok($$INSERT INTO runq.pause_settings (scope, key, reason, paused_at)
                  VALUES ('class', '4999', 'maintenance', now()), ('kind', 'schema-p', NULL, now()),
                         ('tenant', 'schema-p', NULL, now()), ('schedule', 'schema-p', NULL, now())$$,
                'pauses of the four scopes are accepted, with or without a reason');
SELECT throws_ok($$INSERT INTO runq.pause_settings (scope, key, paused_at) VALUES ('tenant', 'schema-p', now())$$,
                 '23505', NULL, 'a second pause of one (scope, key) is rejected');
SELECT throws_ok($$INSERT INTO runq.pause_settings (scope, key, paused_at) VALUES ('queue', 'schema-p', now())$$,
                 '23514', NULL, 'a pause scope other than class, kind, tenant or schedule is rejected');
SELECT throws_ok($$INSERT INTO runq.pause_settings (scope, key, paused_at) VALUES ('tenant', NULL, now())$$,
                 '23502', NULL, 'a pause of a NULL key is rejected');
SELECT throws_ok($$INSERT INTO runq.pause_settings (scope, key) VALUES ('tenant', 'schema-p2')$$,
                 '23502', NULL, 'a pause without paused_at is rejected');

SELECT * FROM finish();
ROLLBACK;
