"""sql/schema.sql is the schema the whole plan leaves (scripts/gen-schema
writes it), and its header names every table and entry point there is.

The comparison does not hold this file's text against a dump made by other
binaries (deparsing differs between major versions): it loads the file into a
fresh database and compares what scripts/gen-schema makes of that with what it
makes of a fresh deploy, on the same server with the same pg_dump, so it holds
on any version."""
import difflib
import re
import runpy
from collections.abc import Iterator

import pytest
from pgutil import ROOT, create_database, drop_database, psql, run, unique_name

HEADER: str = runpy.run_path(str(ROOT / "scripts" / "gen-schema"))["HEADER"]
SCHEMA_FILE = ROOT / "sql" / "schema.sql"


@pytest.fixture
def loaded_url(server_url: str) -> Iterator[str]:
    """A database with nothing but sql/schema.sql loaded."""
    name = unique_name("runq_test")
    url = create_database(server_url, name)
    # pg_dump's own SET of it is among the lines gen-schema takes out: without
    # it, a LANGUAGE sql body is checked before the tables it reads exist.
    psql(url, "-c", "SET check_function_bodies = off", "-f", str(SCHEMA_FILE))
    yield url
    drop_database(server_url, name)


def test_schema_file_is_the_plan_as_it_stands(loaded_url: str) -> None:
    assert SCHEMA_FILE.read_text().startswith(HEADER + "\n"), \
        "sql/schema.sql has another header than scripts/gen-schema: run `make schema`"
    fresh = run("scripts/gen-schema", "-").stdout  # a fresh sqitch deploy of the plan
    assert "CREATE TABLE runq.runs (" in fresh
    diff = list(difflib.unified_diff(
        fresh.splitlines(), run("scripts/gen-schema", "--db", loaded_url, "-").stdout.splitlines(),
        "the plan", "sql/schema.sql", n=1, lineterm=""))
    if diff:
        pytest.fail("sql/schema.sql is stale: run `make schema`\n" + "\n".join(diff[:80]),
                    pytrace=False)


def test_header_names_every_table_and_entry_point(db_url: str) -> None:
    # db_url holds runq as sql/runq.sql installs it: the whole plan.
    names = psql(db_url, "-A", "-t", "-c", """
        SELECT c.relname FROM pg_class AS c
         WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
        UNION
        SELECT p.proname FROM pg_proc AS p
         WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'
        """).stdout.split()
    assert len(names) > 20
    missing = [n for n in names if not re.search(rf"\brunq\.{n}\b", HEADER)]
    assert missing == [], "scripts/gen-schema's HEADER does not name " + \
        ", ".join(f"runq.{n}" for n in missing)
