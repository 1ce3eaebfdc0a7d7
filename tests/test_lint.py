"""Linters in CI: plpgsql_check over every PL/pgSQL function in the
schema runq, and squawk over the deploy scripts. Each reports nothing, or the
test fails with what it said; each is also shown to bite on a sample.

plpgsql_check runs with every warning class on (all_warnings: other, extra,
performance, security, compatibility) and with in-comment options off, so no
`@plpgsql_check_options` comment in a body can silence it. A finding is fixed
in the function, not accepted here.

squawk reads .squawk.toml at the root (its exclusions and why are there).
Those exclusions hold for a brand-new schema only: a change after the first
tag in sqitch.plan runs against live databases, so it is linted with no
exclusions at all. An exception in a deploy script is a `-- squawk-ignore
<rule>` line, and each must sit under a comment that says why.
"""
from __future__ import annotations

import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import tomllib
from pgutil import ROOT

# Checks of the repository's files alone, which no server version changes;
# the plpgsql_check tests below need PostgreSQL 15's extension anyway.
pytestmark = pytest.mark.once

# -- plpgsql_check ------------------------------------------------------------

# A trigger function is checked against the table of its trigger (relid).
CHECK = """
SELECT p.oid::regprocedure::text AS function, t.level, t.lineno, t.sqlstate, t.message,
       t.detail, t.hint, t.statement
  FROM pg_catalog.pg_proc AS p
 CROSS JOIN LATERAL plpgsql_check_function_tb(
           p.oid,
           relid => coalesce((SELECT min(g.tgrelid::oid) FROM pg_catalog.pg_trigger AS g
                               WHERE g.tgfoid = p.oid), 0)::regclass,
           all_warnings => true, use_incomment_options => false) AS t
 WHERE p.pronamespace = %(schema)s::regnamespace
   AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language AS l WHERE l.lanname = 'plpgsql')
 ORDER BY 1, t.lineno
"""


def plpgsql_findings(conn: psycopg.Connection, schema: str) -> list[tuple]:
    return conn.execute(CHECK, {"schema": schema}).fetchall()


def plpgsql_functions(conn: psycopg.Connection, schema: str) -> list[str]:
    return [r[0] for r in conn.execute(
        """SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = %s::regnamespace
              AND p.prolang = (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'plpgsql')
            ORDER BY 1""", (schema,))]


@pytest.mark.plpgsql_check
def test_plpgsql_check_finds_nothing_in_runq(conn: psycopg.Connection) -> None:
    conn.execute("CREATE EXTENSION plpgsql_check")
    # Every function of the contract but the SQL-language helpers is PL/pgSQL;
    # an empty list would make the check below vacuous.
    checked = plpgsql_functions(conn, "runq")
    assert len(checked) >= 20, checked
    findings = plpgsql_findings(conn, "runq")
    assert not findings, "plpgsql_check:\n" + "\n".join(
        f"{fn} line {line}: {level} {state}: {msg}"
        + (f"\n    DETAIL: {detail}" if detail else "") + (f"\n    HINT: {hint}" if hint else "")
        for fn, level, line, state, msg, detail, hint, _ in findings)


@pytest.mark.plpgsql_check
def test_plpgsql_check_bites(conn: psycopg.Connection) -> None:
    # The same query over a schema holding what it must report: a column that
    # does not exist (error), an unused variable (warning), a routine
    # marked VOLATILE that only reads (performance warning) and a dynamic SQL
    # string built from a parameter (security warning).
    conn.execute("CREATE EXTENSION plpgsql_check")
    conn.execute("CREATE SCHEMA lint_probe")
    conn.execute("CREATE TABLE lint_probe.t (id bigint PRIMARY KEY, name text)")
    conn.execute("""
        CREATE FUNCTION lint_probe.broken(p_id bigint) RETURNS bigint
            LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            v_n bigint;
        BEGIN
            SELECT t.no_such_column INTO v_n FROM lint_probe.t AS t WHERE t.id = p_id;
            RETURN v_n;
        END $$""")
    conn.execute("""
        CREATE FUNCTION lint_probe.sloppy(p_id bigint) RETURNS bigint
            LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            v_unused integer;
        BEGIN
            RETURN (SELECT count(*) FROM lint_probe.t AS t WHERE t.id = p_id);
        END $$""")
    conn.execute("""
        CREATE FUNCTION lint_probe.unsafe(p_name text) RETURNS bigint
            LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            v_n bigint;
        BEGIN
            EXECUTE 'SELECT count(*) FROM lint_probe.t WHERE name = ''' || p_name || ''''
               INTO v_n;
            RETURN v_n;
        END $$""")
    findings = plpgsql_findings(conn, "lint_probe")
    levels = {(fn.split("(")[0], level) for fn, level, *_ in findings}
    messages = " | ".join(f[4] for f in findings)
    assert ("lint_probe.broken", "error") in levels, findings
    assert "no_such_column" in messages, findings
    assert ("lint_probe.sloppy", "warning") in levels, findings
    assert "unused variable" in messages, findings
    assert ("lint_probe.sloppy", "performance") in levels, findings
    assert ("lint_probe.unsafe", "security") in levels, findings


# -- squawk -------------------------------------------------------------------

def squawk_bin() -> str:
    for candidate in (Path(sys.executable).parent / "squawk", shutil.which("squawk")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    raise AssertionError("squawk is not installed: it comes from PyPI's squawk-cli "
                         "(requirements-dev.txt); `make test` installs it into .venv")


def squawk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([squawk_bin(), "--reporter", "gcc", *args], cwd=ROOT,
                          capture_output=True, text=True, check=False)


def plan_changes() -> tuple[list[str], list[str]]:
    """The deploy scripts (stems: "name", or "name@tag" for a reworked change's
    earlier version) of the changes before sqitch.plan's first tag, and after it."""
    stems: list[str] = runpy.run_path(str(ROOT / "scripts" / "gen-sql"))["changes"]()
    before: list[str] = []
    for line in (ROOT / "sqitch.plan").read_text().splitlines():
        line = line.strip()
        if line.startswith("@"):
            break
        if line and not line.startswith(("%", "#")):
            before.append(line.split()[0])
    return stems[:len(before)], stems[len(before):]


def test_every_deploy_script_is_in_the_plan() -> None:
    # Otherwise a script would escape both lint runs below.
    before, after = plan_changes()
    scripts = {p.stem for p in (ROOT / "deploy").glob("*.sql")}
    assert scripts == set(before) | set(after)


def test_squawk_initial_plan_is_clean() -> None:
    before, _ = plan_changes()
    proc = squawk("--config", ".squawk.toml", *(f"deploy/{c}.sql" for c in before))
    assert proc.returncode == 0 and not proc.stdout.strip(), \
        f"squawk {squawk_bin()}:\n{proc.stdout}{proc.stderr}"


def test_squawk_released_changes_are_clean_without_exclusions(tmp_path: Path) -> None:
    _, after = plan_changes()
    no_exclusions = tmp_path / "squawk.toml"
    no_exclusions.write_text('pg_version = "15.0"\n')
    # No change after a tag yet: the run is over the test's own sample, so
    # that the day one exists this path is known to work (and to lint).
    sample = tmp_path / "sample_ok.sql"
    sample.write_text("BEGIN;\nSET LOCAL lock_timeout = '2s';\nSET LOCAL statement_timeout = '5s';\n"
                      "COMMENT ON SCHEMA runq IS 'runq';\nCOMMIT;\n")
    proc = squawk("--config", str(no_exclusions), str(sample),
                  *(f"deploy/{c}.sql" for c in after))
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_squawk_bites(tmp_path: Path) -> None:
    # With the project's exclusions in force, a migration that alters a live
    # table is still reported...
    bad = tmp_path / "bad.sql"
    bad.write_text("BEGIN;\nALTER TABLE runq.runs ADD COLUMN note text NOT NULL;\n"
                   "CREATE TABLE runq.extra (id integer PRIMARY KEY);\nCOMMIT;\n")
    proc = squawk("--config", ".squawk.toml", str(bad))
    assert proc.returncode != 0
    assert "adding-required-field" in proc.stdout and "prefer-bigint-over-int" in proc.stdout, \
        proc.stdout
    # ...and with no exclusions, so is an index built without CONCURRENTLY.
    none = tmp_path / "none.toml"
    none.write_text('pg_version = "15.0"\n')
    index = tmp_path / "index.sql"
    index.write_text("CREATE INDEX runs_kind_idx ON runq.runs (kind);\n")
    proc = squawk("--config", str(none), str(index))
    assert "require-concurrent-index-creation" in proc.stdout, proc.stdout


def test_squawk_exclusions_are_few_and_each_justified() -> None:
    text = (ROOT / ".squawk.toml").read_text()
    rules = tomllib.loads(text).get("excluded_rules", [])
    assert set(rules) <= {"require-concurrent-index-creation", "require-lock-timeout",
                          "require-statement-timeout"}, rules
    lines = text.splitlines()
    for rule in rules:
        at = next(i for i, line in enumerate(lines) if f'"{rule}"' in line)
        assert lines[at - 1].strip().startswith("#"), f"{rule}: no comment above it says why"


def unjustified_ignores(text: str) -> list[int]:
    """Line numbers of `-- squawk-ignore` lines (each silences the next line)
    without a comment above them saying why (another ignore is no reason)."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        if re.match(r"\s*--\s*squawk-ignore", line):
            above = lines[i - 1].strip() if i else ""
            if not above.startswith("--") or "squawk-ignore" in above:
                bad.append(i + 1)
    return bad


def test_squawk_ignores_in_deploy_are_justified() -> None:
    unjustified = [f"{path.name}:{n}" for path in sorted((ROOT / "deploy").glob("*.sql"))
                   for n in unjustified_ignores(path.read_text())]
    assert not unjustified, "squawk-ignore without a reason above it: " + ", ".join(unjustified)


@pytest.mark.parametrize("comment, bad", [
    ("    -- squawk-ignore prefer-bigint-over-int", [2]),
    ("    -- squawk-ignore prefer-bigint-over-int\n    -- squawk-ignore prefer-bigint-over-int", [2, 3]),
    ("    -- bounded by max_attempts, an integer\n    -- squawk-ignore prefer-bigint-over-int", []),
])
def test_squawk_ignore_check_bites(comment: str, bad: list[int]) -> None:
    assert unjustified_ignores(f"CREATE TABLE t (\n{comment}\n    n integer\n);") == bad


# -- what a change locks --------------------------------------------------------
# Rules for the changes not yet released (after sqitch.plan's last tag), which
# run against live databases: released changes are frozen, and docs/guides/upgrading.md says
# how to get around the one that breaks them (check_runs_shape_validated).

TABLE_DDL = re.compile(r"^\s*(ALTER\s+TABLE|CREATE\s+(UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX|CLUSTER"
                       r"|VACUUM\s+FULL|TRUNCATE|LOCK\s+TABLE|DROP\s+TABLE)\b", re.IGNORECASE)
VALIDATE = re.compile(r"\bVALIDATE\s+CONSTRAINT\b", re.IGNORECASE)
LOCKS_LINE = re.compile(r"^-- Locks: \S", re.MULTILINE)


def unreleased_changes() -> list[str]:
    """Deploy script stems of the changes after the last tag."""
    stems: list[str] = runpy.run_path(str(ROOT / "scripts" / "gen-sql"))["changes"]()
    after = 0
    for line in (ROOT / "sqitch.plan").read_text().splitlines():
        line = line.strip()
        if line.startswith("@"):
            after = 0
        elif line and not line.startswith(("%", "#")):
            after += 1
    return stems[len(stems) - after:]


def lock_findings(name: str, text: str) -> list[str]:
    """What a migration script does wrong by the rules above: a VALIDATE that
    shares its transaction with another table statement (whose lock would
    wait behind every long reader, and roll the scan back), or a table
    statement with no `-- Locks:` line saying what it locks and for how long."""
    code = re.sub(r"\$(\w*)\$.*?\$\1\$", "", text, flags=re.DOTALL)  # function bodies
    code = re.sub(r"--[^\n]*", "", code)
    statements = [s for s in code.split(";") if TABLE_DDL.match(s)]
    findings = []
    if any(VALIDATE.search(s) for s in statements) and any(not VALIDATE.search(s) for s in statements):
        findings.append(f"{name}: VALIDATE CONSTRAINT shares its change with another table statement")
    if statements and not LOCKS_LINE.search(text):
        findings.append(f"{name}: changes a table but has no '-- Locks:' line")
    return findings


def test_unreleased_changes_validate_alone_and_say_what_they_lock() -> None:
    findings = [finding for stem in unreleased_changes()
                for kind in ("deploy", "revert")
                for finding in lock_findings(f"{kind}/{stem}.sql",
                                             (ROOT / kind / f"{stem}.sql").read_text())]
    assert not findings, "\n".join(findings)


def test_the_lock_rules_bite() -> None:
    # The released change that made the rule: validation and drops in one.
    released = (ROOT / "deploy" / "check_runs_shape_validated.sql").read_text()
    assert lock_findings("v", released) == [
        "v: VALIDATE CONSTRAINT shares its change with another table statement",
        "v: changes a table but has no '-- Locks:' line"]
    alone = ("-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for one scan; reads and writes go on.\n"
             "BEGIN;\nALTER TABLE runq.runs VALIDATE CONSTRAINT c;\nCOMMIT;\n")
    assert lock_findings("ok", alone) == []
    assert lock_findings("quiet", "CREATE INDEX CONCURRENTLY i ON runq.runs (kind);\n") == [
        "quiet: changes a table but has no '-- Locks:' line"]
    function = "CREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$ TRUNCATE runq.runs $$;\n"
    assert lock_findings("function", function) == []
