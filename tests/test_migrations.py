"""The migrations themselves: they deploy, revert cleanly, verify honestly, and
sql/runq.sql is the same schema as the plan.

Every test reads sqitch.plan, so changes appended later are covered without
editing this file.
"""
import difflib
import re
import runpy
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pgutil import (
    ROOT,
    create_database,
    drop_database,
    pg_tool,
    psql,
    run,
    sqitch,
    sqitch_target,
    unique_name,
    with_dbname,
)

# scripts/gen-sql's plan parser, so these tests and the generator agree on the plan.
gen_sql = runpy.run_path(str(ROOT / "scripts" / "gen-sql"))
CHANGES: list[str] = gen_sql["changes"]()

# Objects left in a database after a full revert that are not sqitch's own:
# everything with a user OID (>= 16384, FirstNormalObjectId) that does not
# depend, transitively, on sqitch's registry schema, and any shared dependency
# (owner, grant) recorded for this database.
LEFTOVERS = """
WITH RECURSIVE registry (classid, objid) AS (
    SELECT 'pg_namespace'::regclass::oid, oid FROM pg_namespace WHERE nspname = 'sqitch'
    UNION
    SELECT d.classid, d.objid
      FROM pg_depend AS d JOIN registry AS r
        ON d.refclassid = r.classid AND d.refobjid = r.objid
), user_objects (classid, objid) AS (
              SELECT 'pg_namespace'::regclass, oid FROM pg_namespace
    UNION ALL SELECT 'pg_class'::regclass, oid FROM pg_class
    UNION ALL SELECT 'pg_proc'::regclass, oid FROM pg_proc
    UNION ALL SELECT 'pg_type'::regclass, oid FROM pg_type
    UNION ALL SELECT 'pg_constraint'::regclass, oid FROM pg_constraint
    UNION ALL SELECT 'pg_trigger'::regclass, oid FROM pg_trigger
    UNION ALL SELECT 'pg_default_acl'::regclass, oid FROM pg_default_acl
    UNION ALL SELECT classid, objid FROM pg_depend
    UNION ALL SELECT refclassid, refobjid FROM pg_depend
    UNION ALL SELECT classoid, objoid FROM pg_description
)
SELECT DISTINCT coalesce(pg_describe_object(u.classid, u.objid, 0), u.objid::text)
  FROM user_objects AS u
 WHERE u.objid >= 16384
   AND (u.classid, u.objid) NOT IN (SELECT classid, objid FROM registry)
UNION ALL
SELECT 'shared dependency: ' || pg_describe_object(s.classid, s.objid, s.objsubid)
       || ' on ' || pg_describe_object(s.refclassid, s.refobjid, 0)
  FROM pg_shdepend AS s JOIN pg_database AS d ON d.oid = s.dbid
 WHERE d.datname = current_database()
"""


@pytest.fixture(scope="module")
def sqitch_db(server_url: str) -> Iterator[str]:
    """Name of a database deployed with `sqitch deploy`, cloned by the tests."""
    name = unique_name("runq_sqitch")
    # No verify here: the per-change test below runs every verify script itself.
    sqitch("deploy", create_database(server_url, name), "--no-verify")
    yield name
    drop_database(server_url, name)


@pytest.fixture
def clone(server_url: str) -> Iterator:
    """clone(template) -> URL of a fresh copy, dropped after the test."""
    names: list[str] = []

    def _clone(template: str) -> str:
        names.append(unique_name("runq_clone"))
        return create_database(server_url, names[-1], template=template)

    yield _clone
    for name in names:
        drop_database(server_url, name)


def query(url: str, sql: str) -> list[str]:
    return psql(url, "-A", "-t", "-c", sql).stdout.splitlines()


def test_deploy_revert_deploy_round_trip(server_url: str, clone) -> None:
    url = clone("template0")
    sqitch("deploy", url, "--no-verify")  # the second deploy verifies
    sqitch("revert", url, "-y")
    assert query(url, "SELECT count(*) FROM pg_namespace WHERE nspname = 'runq'") == ["0"]
    assert query(url, LEFTOVERS) == []
    # The roles are cluster-wide and stay, for other databases' sake.
    assert query(url, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'runq%' "
                      "AND NOT rolcanlogin ORDER BY 1") == [
        "runq_admin", "runq_client", "runq_observer", "runq_worker"]
    sqitch("deploy", url)  # sqitch.conf: deploy.verify = true


# Runs in every status, made through the functions of the release: what a
# live database holds when a later change is deployed onto it.
RUNS_IN_EVERY_STATUS = """
SELECT runq.submit('up', 'k', session_id => s) FROM unnest(ARRAY['run', 'done', 'dead', 'ask', 'wait']) AS s;
CREATE TEMP TABLE c AS SELECT run_id, epoch, session_id FROM runq.claim(ARRAY[10], 'w', max_runs => 5);
SELECT runq.checkpoint(run_id, epoch, '{"step": 1}') FROM c WHERE session_id = 'ask';
SELECT runq.ask_user(run_id, epoch, '{"q": "?"}') FROM c WHERE session_id IN ('ask', 'wait');
SELECT runq.deliver_input(run_id, '{"a": 1}') FROM c WHERE session_id = 'ask';
SELECT runq.complete(run_id, epoch, '{"ok": true}') FROM c WHERE session_id = 'done';
SELECT runq.fail(run_id, epoch, '{"code": "boom", "message": "m"}') FROM c WHERE session_id = 'dead';
SELECT runq.submit('up', 'k', session_id => 'queued');
SELECT runq.submit('up', 'k', session_id => 'ttl', queue_ttl => interval '1 hour');
SELECT runq.submit('up', 'k', scheduled_for => now() + interval '1 day');
SELECT runq.cancel(run_id) FROM runq.submit('up', 'k', session_id => 'cancel');
SELECT runq.submit('up', 'k', '{"x": 1}', idempotency_key => 'kept');
"""


RELEASES = [line.split()[0] for line in (ROOT / "sqitch.plan").read_text().splitlines()
            if line.startswith("@")]


# The oldest release's upgrade deploys every later change too: on the
# PostgreSQL 18 run (which deselects once) it alone, to stay inside CI's time.
@pytest.mark.parametrize("released", [RELEASES[0]] + [pytest.param(r, marks=pytest.mark.once)
                                                      for r in RELEASES[1:]])
def test_upgrade_from_each_release_keeps_runs_and_reverts(released: str, clone) -> None:
    # Every later change is deployed onto a database of the release holding
    # runs in every status, verified, and reverted with those runs in place.
    url = clone("template0")
    sqitch("deploy", url, "--to", released)
    psql(url, "-v", "ON_ERROR_STOP=1", "-c", RUNS_IN_EVERY_STATUS)
    before = query(url, "SELECT run_id, status FROM runq.runs ORDER BY run_id")
    assert {r.split("|")[1] for r in before} == {
        "queued", "running", "waiting_for_user", "succeeded", "failed", "cancelled"}
    sqitch("deploy", url)  # verifies each change
    assert query(url, "SELECT run_id, status FROM runq.runs ORDER BY run_id") == before
    # The upgraded functions run on the old rows: the requeued run resumes with
    # its checkpoint and the input delivered after it.
    assert query(url, "SELECT checkpoint, inputs, resumed FROM runq.claim(ARRAY[10], 'w2')") == [
        '{"step": 1}|[{"a": 1}]|t']
    # A key stored by the release still recognises its request (the request
    # hash of a submit without budget and timeout is unchanged), and old runs
    # have no budget, no deadline and empty usage totals, to which they add.
    assert query(url, "SELECT outcome FROM runq.submit('up', 'k', '{\"x\": 1}',"
                      " idempotency_key => 'kept')") == ["duplicate"]
    assert query(url, "SELECT DISTINCT g.usage, g.budget IS NULL, g.deadline IS NULL"
                      " FROM runq.runs AS r, runq.get_run(r.run_id) AS g") == ["{}|t|t"]
    assert query(url, "SELECT runq.record_usage(run_id, lease_epoch, '{\"cost_usd\": 0.5}')"
                      " FROM runq.runs WHERE session_id = 'ask'") == ["t"]
    assert query(url, "SELECT g.usage FROM runq.runs AS r, runq.get_run(r.run_id) AS g"
                      " WHERE r.session_id = 'ask'") == ['{"cost_usd": 0.5}']
    # Old runs belong to no schedule, and a schedule made on the upgraded
    # database ticks beside them (made an hour older by hand: its first slot,
    # creation + 1 hour, has come).
    assert query(url, "SELECT count(*) FROM runq.runs WHERE schedule IS NOT NULL") == ["0"]
    psql(url, "-v", "ON_ERROR_STOP=1",
         "-c", "SELECT runq.create_schedule('up-s', 'up', 'k', every => interval '1 hour')",
         "-c", "UPDATE runq.schedule_settings"
               " SET created_at = created_at - interval '1 hour', next_slot = created_at")
    assert query(url, "SELECT schedule, outcome FROM runq.tick()") == ["up-s|created"]
    assert query(url, "SELECT status FROM runq.runs WHERE schedule = 'up-s'") == ["queued"]
    sqitch("revert", url, "--to", released, "-y")
    assert query(url, "SELECT count(*) FROM runq.runs") == [str(len(before) + 1)]
    sqitch("verify", url)


def test_validating_first_spares_the_released_validation_its_scan(clone) -> None:
    # The upgrade guide's way (docs/guides/upgrading.md) to upgrade a big
    # runs table from v0.1.0: deploy to check_runs_shape, VALIDATE by hand
    # (online), then deploy the rest. The
    # released check_runs_shape_validated must then read no row of runs, and
    # a deploy behind a long reader must give up within its lock timeout
    # without undoing the validation.
    url = clone("template0")
    sqitch("deploy", url, "--to", "@v0.1.0")
    psql(url, "-v", "ON_ERROR_STOP=1", "-c", RUNS_IN_EVERY_STATUS)
    sqitch("deploy", url, "--to", "check_runs_shape")
    psql(url, "-c", "ALTER TABLE runq.runs VALIDATE CONSTRAINT runs_shape_consistent")
    # Each psql session flushes its statistics when it exits.
    scans = "SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'runq.runs'::regclass"
    before = int(query(url, scans)[0])

    with psycopg.connect(url) as reader:  # a transaction, holding ACCESS SHARE on runs
        reader.execute("SELECT count(*) FROM runq.runs")  # one sequential scan
        started = time.monotonic()
        blocked = run("sqitch", "deploy", "--no-verify", "--to", "check_runs_shape_validated",
                      sqitch_target(url), check=False)
        waited = time.monotonic() - started
    assert blocked.returncode != 0, blocked.stdout
    assert "lock timeout" in blocked.stdout + blocked.stderr
    assert waited < 30, f"the blocked deploy took {waited:.0f} s"
    assert query(url, "SELECT convalidated FROM pg_constraint "
                      "WHERE conname = 'runs_shape_consistent'") == ["t"]

    sqitch("deploy", url, "--no-verify", "--to", "check_runs_shape_validated")
    assert int(query(url, scans)[0]) == before + 1  # the reader's scan, and no other
    sqitch("verify", url)


@pytest.mark.parametrize("index", range(len(CHANGES)), ids=CHANGES)
def test_verify_fails_without_its_object(index: int, sqitch_db: str, clone) -> None:
    # Revert every later change (newest first) so nothing depends on this
    # change's object; its verify must still pass then, and fail once the
    # change's own revert has run.
    stem = CHANGES[index]
    url = clone(sqitch_db)
    later = [arg for s in reversed(CHANGES[index + 1:]) for arg in ("-f", f"revert/{s}.sql")]
    if later:
        psql(url, *later)  # one psql for all: the per-change cost stays flat
    psql(url, "-f", f"verify/{stem}.sql")
    psql(url, "-f", f"revert/{stem}.sql")
    verify = psql(url, "-f", f"verify/{stem}.sql", check=False)
    assert verify.returncode != 0, f"verify/{stem}.sql passes after revert/{stem}.sql"


def schema_dump(url: str) -> str:
    """pg_dump of schema runq without what differs between two identical
    schemas: comments, blank lines, SET lines and the random \\restrict keys
    that newer minor releases of pg_dump emit."""
    out = run(pg_tool("pg_dump"), "--schema-only", "--schema=runq", "-d", url).stdout
    return "\n".join(
        line for line in out.splitlines()
        if line.strip()
        and not line.startswith(("--", "SET ", "\\restrict", "\\unrestrict"))
        and not re.match(r"SELECT pg_catalog\.set_config\('search_path'", line)
    ) + "\n"


def test_sql_file_is_generated_from_the_plan() -> None:
    fresh = (ROOT / "sql" / "runq.sql").read_text() == run("scripts/gen-sql", "-").stdout
    assert fresh, "sql/runq.sql is stale: run `make sql` and commit it"


def test_sql_file_loads_as_one_query_in_a_transaction_block(server_url: str) -> None:
    # Any client may send the file as it is, as one simple query, even after
    # its own BEGIN: no statement in it may refuse a transaction block (the
    # CONCURRENTLY of the sqitch changes' index statements did).
    name = unique_name("runq_onequery")
    url = create_database(server_url, name)
    try:
        with psycopg.connect(url) as conn:  # not autocommit: inside BEGIN
            conn.execute((ROOT / "sql" / "runq.sql").read_bytes())
            conn.commit()
        assert query(url, "SELECT count(*) > 50 FROM pg_proc"
                          " WHERE pronamespace = 'runq'::regnamespace") == ["t"]
    finally:
        drop_database(server_url, name)


def test_sql_file_equals_sqitch_deploy(server_url: str, sqitch_db: str,
                                       template_db: str) -> None:
    # template_db is the conftest's database loaded from sql/runq.sql.
    sqitch_dump = schema_dump(with_dbname(server_url, sqitch_db))
    assert "CREATE SCHEMA runq;" in sqitch_dump
    diff = list(difflib.unified_diff(
        sqitch_dump.splitlines(), schema_dump(with_dbname(server_url, template_db)).splitlines(),
        "sqitch deploy", "sql/runq.sql", n=1, lineterm=""))
    if diff:
        pytest.fail("sql/runq.sql and sqitch deploy differ (run `make sql`?):\n"
                    + "\n".join(diff[:80]), pytrace=False)


def test_schema_comparison_catches_a_stale_sql_file(
        server_url: str, sqitch_db: str, clone, tmp_path: Path) -> None:
    # A stale file lacks the newest changes. Cut from the last change that has
    # DDL in it (a data-only change would not show in a schema dump).
    ddl = re.compile(r"^\s*(CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE)\b", re.IGNORECASE | re.MULTILINE)
    cut = max(i for i, s in enumerate(CHANGES)
              if ddl.search((ROOT / "deploy" / f"{s}.sql").read_text()))
    stale = tmp_path / "stale.sql"
    stale.write_text(gen_sql["render"](CHANGES[:cut]))
    url = clone("template0")
    psql(url, "-f", str(stale))
    assert schema_dump(url) != schema_dump(with_dbname(server_url, sqitch_db))


# One way to break each check of verify/lib/*.sql: the change whose verify
# must catch it, SQL that breaks it, SQL that mends it, and what the verify
# then says. Each is done to a copy of the deployed database.
HEARTBEAT = "runq.heartbeat(bigint, bigint)"
CLAIM = "runq.claim(integer[], text, interval, integer, text[])"
PINNED = "SET search_path = pg_catalog, pg_temp"


def grant(function: str, role: str) -> tuple[str, str]:
    return (f"GRANT EXECUTE ON FUNCTION {function} TO {role}",
            f"REVOKE EXECUTE ON FUNCTION {function} FROM {role}")


def on_schema(privilege: str, role: str) -> tuple[str, str]:
    return (f"GRANT {privilege} ON SCHEMA runq TO {role}",
            f"REVOKE {privilege} ON SCHEMA runq FROM {role}")


def alter(function: str, breaks: str, mends: str) -> tuple[str, str]:
    return f"ALTER FUNCTION {function} {breaks}", f"ALTER FUNCTION {function} {mends}"


def valid(index: str, value: str) -> str:
    # What a failed CREATE INDEX CONCURRENTLY leaves behind, without failing one.
    return f"UPDATE pg_index SET indisvalid = {value} WHERE indexrelid = '{index}'::regclass"


BREAKAGES = [
    pytest.param("function_heartbeat@HEAD", *grant(HEARTBEAT, "PUBLIC"),
                 "EXECUTE is granted to {PUBLIC,runq_admin,runq_worker}", id="execute-public"),
    pytest.param("function_heartbeat@HEAD", *grant(HEARTBEAT, "runq_client"),
                 "EXECUTE is granted to {runq_admin,runq_client,runq_worker}",
                 id="execute-wrong-role"),
    pytest.param("function_heartbeat@HEAD", *reversed(grant(HEARTBEAT, "runq_admin")),
                 "EXECUTE is granted to {runq_worker}, not to {runq_admin,runq_worker}",
                 id="execute-role-missing"),
    pytest.param("function_sweep@HEAD", *grant("runq.sweep(integer)", "pg_monitor"),
                 "EXECUTE is granted to {pg_monitor,", id="execute-other-role"),
    pytest.param("function__backoff", *grant("runq._backoff(integer)", "runq_admin"),
                 "EXECUTE is granted to {runq_admin}, not to {}", id="execute-internal"),
    pytest.param("function_get_run@HEAD", "COMMENT ON FUNCTION runq.get_run(bigint) IS NULL",
                 "COMMENT ON FUNCTION runq.get_run(bigint) IS 'One run.'",
                 "has no COMMENT", id="comment"),
    pytest.param("function_claim@HEAD", *alter(CLAIM, "RESET search_path", PINNED),
                 "search_path is not pinned", id="search-path"),
    pytest.param("function__backoff", *alter("runq._backoff(integer)", "RESET ALL", PINNED),
                 "search_path is not pinned", id="search-path-internal"),
    pytest.param("function_complete@HEAD", *alter("runq.complete(bigint, bigint, jsonb)",
                                                  "SECURITY INVOKER", "SECURITY DEFINER"),
                 "SECURITY DEFINER expected", id="definer"),
    pytest.param("function__refuse@HEAD", *alter("runq._refuse(bigint, bigint, text, boolean)",
                                                 "SECURITY DEFINER", "SECURITY INVOKER"),
                 "SECURITY INVOKER expected", id="invoker-internal"),
    pytest.param("function_claim@HEAD",
                 "CREATE FUNCTION runq.claim(integer) RETURNS integer LANGUAGE sql RETURN 1",
                 "DROP FUNCTION runq.claim(integer)",
                 "another function of that name", id="old-signature-left"),
    pytest.param("function_heartbeat@HEAD",
                 "\\i revert/function_heartbeat.sql", "\\i deploy/function_heartbeat.sql",
                 "its source lacks 'r.deadline > v_now'", id="body-of-another-version"),
    pytest.param("argument_checks",
                 *alter("runq._check_count(text, integer)", "STABLE", "IMMUTABLE"),
                 "volatility s, not i", id="volatility-of-one-of-several"),
    # A SQL-standard body created under a path with a look-alike ahead of
    # pg_catalog's (an exact type beats anyarray) is bound to it for good.
    pytest.param("argument_checks",
                 "CREATE FUNCTION public.cardinality(integer[]) RETURNS integer LANGUAGE sql RETURN 1;\n"
                 "SET search_path = public, pg_catalog;\n"
                 "CREATE OR REPLACE FUNCTION runq._is_count(value integer) RETURNS boolean"
                 " LANGUAGE sql IMMUTABLE RETURN cardinality(ARRAY[value]) >= 1;",
                 "SET search_path = pg_catalog;\n"
                 "CREATE OR REPLACE FUNCTION runq._is_count(value integer) RETURNS boolean"
                 " LANGUAGE sql IMMUTABLE RETURN value >= 1;\n"
                 "DROP FUNCTION public.cardinality(integer[]);",
                 "bound to a function or operator outside", id="sql-body-bound-to-a-look-alike"),
    pytest.param("function__inputs_after",
                 *alter("runq._inputs_after(bigint, bigint)", "STABLE", "VOLATILE"),
                 "volatility s, not v", id="volatility"),
    pytest.param("domain_counter", "COMMENT ON DOMAIN runq.counter IS NULL",
                 "COMMENT ON DOMAIN runq.counter IS 'A count.'",
                 "has no COMMENT", id="domain-comment"),
    pytest.param("domain_counter", "ALTER DOMAIN runq.counter DROP CONSTRAINT counter_check",
                 "ALTER DOMAIN runq.counter ADD CHECK (VALUE >= 0)",
                 "has no CHECK", id="domain-check"),
    pytest.param("index_runs_claimable_kind", valid("runq.runs_claimable_kind_idx", "false"),
                 valid("runq.runs_claimable_kind_idx", "true"),
                 "is not a valid index", id="index-invalid"),
    pytest.param("index_runs_session_active@HEAD",
                 "DROP INDEX runq.runs_session_active_key;\n"
                 "CREATE INDEX runs_session_active_key ON runq.runs (tenant_id, session_id)",
                 # the deploy replaces whatever index has the name
                 "\\i deploy/index_runs_session_active.sql",
                 "unique and not named *_key, or named *_key and not unique",
                 id="index-not-unique"),
    pytest.param("role_runq_worker", *on_schema("CREATE", "runq_worker"),
                 "or CREATE there", id="role-create"),
    pytest.param("role_runq_client", *reversed(on_schema("USAGE", "runq_client")),
                 "no USAGE on schema runq", id="role-usage"),
]


def sqitch_verify(url: str, change: str) -> subprocess.CompletedProcess[str]:
    """`sqitch verify` of one change (the whole plan's takes ~10 s)."""
    return run("sqitch", "verify", "--from", change, "--to", change, sqitch_target(url),
               check=False)


@pytest.mark.parametrize(("change", "breaks", "mends", "says"), BREAKAGES)
def test_verify_fails_when_a_check_is_broken(change: str, breaks: str, mends: str, says: str,
                                             sqitch_db: str, clone, tmp_path: Path) -> None:
    url = clone(sqitch_db)
    for name, script in (("breaks", breaks), ("mends", mends)):
        # A file, so that \i works (from the root: psql runs there).
        (tmp_path / f"{name}.sql").write_text(script + "\n")
    psql(url, "-f", str(tmp_path / "breaks.sql"))
    broken = sqitch_verify(url, change)
    assert broken.returncode != 0, f"sqitch verify {change} passes after: {breaks}"
    assert says in broken.stderr, broken.stderr
    psql(url, "-f", str(tmp_path / "mends.sql"))
    mended = sqitch_verify(url, change)
    assert mended.returncode == 0, mended.stdout + mended.stderr


def test_an_internal_sql_standard_body_needs_no_pinned_search_path(sqitch_db: str,
                                                                   clone) -> None:
    # A shape no change has yet: its names are bound when it is created, so
    # search_path cannot change them; SECURITY DEFINER it may still not be,
    # and a public function, or a body in a string, must still pin it.
    url = clone(sqitch_db)

    def helper(function: str, callers: str, *sql: str) -> subprocess.CompletedProcess[str]:
        psql(url, *(arg for s in sql for arg in ("-c", s)))
        return psql(url, "-v", f"function={function}", "-v", f"callers={callers}",
                    "-f", "verify/lib/function.sql", check=False)

    internal = "runq._twice(integer)"
    created = helper(internal, "",
                     f"CREATE FUNCTION {internal} RETURNS integer LANGUAGE sql IMMUTABLE"
                     " RETURN 2 * $1",
                     f"REVOKE ALL ON FUNCTION {internal} FROM PUBLIC",
                     f"COMMENT ON FUNCTION {internal} IS 'Internal: twice its argument.'")
    assert created.returncode == 0, created.stderr
    definer = helper(internal, "", f"ALTER FUNCTION {internal} SECURITY DEFINER")
    assert definer.returncode != 0 and "SECURITY INVOKER expected" in definer.stderr
    in_a_string = helper(internal, "", f"ALTER FUNCTION {internal} SECURITY INVOKER",
                         f"CREATE OR REPLACE FUNCTION {internal} RETURNS integer"
                         " LANGUAGE sql IMMUTABLE AS 'SELECT 2 * $1'")
    assert in_a_string.returncode != 0 and "search_path is not pinned" in in_a_string.stderr
    public = "runq.twice(integer)"
    unpinned = helper(public, "runq_admin",
                      f"CREATE FUNCTION {public} RETURNS integer LANGUAGE sql IMMUTABLE"
                      " SECURITY DEFINER RETURN 2 * $1",
                      f"REVOKE ALL ON FUNCTION {public} FROM PUBLIC",
                      f"GRANT EXECUTE ON FUNCTION {public} TO runq_admin",
                      f"COMMENT ON FUNCTION {public} IS 'Twice its argument.'")
    assert unpinned.returncode != 0 and "search_path is not pinned" in unpinned.stderr
    pinned = helper(public, "runq_admin", f"ALTER FUNCTION {public} {PINNED}")
    assert pinned.returncode == 0, pinned.stderr


def test_every_function_and_domain_goes_through_its_verify_helper(server_url: str,
                                                                  sqitch_db: str) -> None:
    # The helpers hold the checks, so a change whose verify does not include
    # one would go unchecked: every function and domain of the deployed plan
    # must be named by the verify of its change (the newest version's).
    named: dict[str, list[str]] = {"function": [], "domain": []}
    for path in (ROOT / "verify").glob("*.sql"):
        text = path.read_text()
        for kind, names in named.items():
            if "@" in path.stem or f"\\ir lib/{kind}.sql" not in text:
                continue
            for m in re.finditer(rf"^\\set {kind} '?([^'\n]+?)'?$", text, re.MULTILINE):
                names.extend(n.strip() for n in m.group(1).split(";"))
    with psycopg.connect(with_dbname(server_url, sqitch_db)) as conn:
        def rows(sql: str, *params: object) -> list[str]:
            return sorted(r[0] for r in conn.execute(sql, params).fetchall())

        assert rows("SELECT s::regprocedure::text FROM unnest(%s::text[]) AS s",
                    named["function"]) == rows(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'runq'::regnamespace")
        assert rows("SELECT s::regtype::text FROM unnest(%s::text[]) AS s",
                    named["domain"]) == rows(
            "SELECT oid::regtype::text FROM pg_type WHERE typnamespace = 'runq'::regnamespace"
            " AND typtype = 'd'")
