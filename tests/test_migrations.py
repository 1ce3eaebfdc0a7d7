"""The migrations themselves: they deploy, revert cleanly, verify honestly, and
sql/runq.sql is the same schema as the plan.

Every test reads sqitch.plan, so changes appended later are covered without
editing this file.
"""
import difflib
import re
import runpy
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
        "runq_admin", "runq_client", "runq_worker"]
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
"""


RELEASES = [line.split()[0] for line in (ROOT / "sqitch.plan").read_text().splitlines()
            if line.startswith("@")]


@pytest.mark.parametrize("released", RELEASES)
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
    sqitch("revert", url, "--to", released, "-y")
    assert query(url, "SELECT count(*) FROM runq.runs") == [str(len(before))]
    sqitch("verify", url)


def test_validating_first_spares_the_released_validation_its_scan(clone) -> None:
    # The README's way to upgrade a big runs table from v0.1.0: deploy to
    # check_runs_shape, VALIDATE by hand (online), then deploy the rest. The
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
