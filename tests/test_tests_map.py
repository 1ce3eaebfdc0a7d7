"""tests/README.md's map, from each public function and view of schema runq
to the test files that use it, is true: every function and view of the
catalog has its row, and a row lists exactly the files that use its name.

A pgTAP file (tests/pgtap/*.sql) uses a function when it calls runq.<name>(,
and a view when it names runq.<name>. A pytest file (tests/test_*.py but the
suite's own checks, SUITE_CHECKS) uses either the same way in its SQL, or
through the client method of that name (client.heartbeat(...),
ctx.begin_turn()). On a mismatch the message gives the row as the files have
it: check that the change is meant, then copy it.
"""
import re

import psycopg
from pgutil import ROOT, runq_calls

README = ROOT / "tests" / "README.md"
PGTAP = ROOT / "tests" / "pgtap"
PYTEST = ROOT / "tests"

# Tests of the suite itself: their samples call runq, but they test no function.
SUITE_CHECKS = {"test_error_docs.py", "test_house.py", "test_tests_map.py"}
# Methods of these names are not runq's: pytest.fail, test_model's pure-Python
# model of the contract, a ThreadPoolExecutor's submit, a threading.Timer's cancel.
NOT_A_CLIENT = {"runq", "pytest", "model", "pool", "unlock"}
ROW = re.compile(r"^\| `runq\.(\w+)` \|([^|]*)\|([^|]*)\|\s*$")


def public(conn: psycopg.Connection) -> dict[str, str]:
    """Each public function and view of runq: name -> 'function' or 'view'."""
    return dict(conn.execute(
        """SELECT p.proname, 'function' FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'
           UNION
           SELECT c.relname, 'view' FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind = 'v'
              AND c.relname !~ '^_'""").fetchall())


def uses(text: str, name: str, kind: str, client: bool) -> bool:
    if kind == "view":
        used = re.search(rf"\brunq\.{name}\b", text) is not None
    else:
        used = name in runq_calls(text)
    methods = {m.group(1) for m in re.finditer(rf"\b(\w+)\.{name}\(", text)}
    return used or (client and bool(methods - NOT_A_CLIENT))


def actual(objects: dict[str, str]) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (the pgTAP files, the pytest files) that use it."""
    pgtap = {p.name: p.read_text() for p in sorted(PGTAP.glob("*.sql"))}
    pytest = {p.name: p.read_text() for p in sorted(PYTEST.glob("test_*.py"))
              if p.name not in SUITE_CHECKS}
    return {name: ([f for f, text in pgtap.items() if uses(text, name, kind, client=False)],
                   [f for f, text in pytest.items() if uses(text, name, kind, client=True)])
            for name, kind in objects.items()}


def listed() -> dict[str, tuple[list[str], list[str]]]:
    """The map as tests/README.md has it."""
    def files(cell: str) -> list[str]:
        return [f.strip(" `") for f in cell.split(",") if f.strip(" `")]
    return {m.group(1): (files(m.group(2)), files(m.group(3)))
            for m in map(ROW.match, README.read_text().splitlines()) if m}


def row(name: str, files: tuple[list[str], list[str]]) -> str:
    return f"| `runq.{name}` | {', '.join(files[0])} | {', '.join(files[1])} |"


def test_the_map_lists_every_file_that_uses_each_function_and_view(
        conn: psycopg.Connection) -> None:
    objects = public(conn)
    have, want = listed(), actual(objects)
    problems = [f"runq.{name} has no row: add {row(name, want[name])}"
                for name in sorted(set(want) - set(have))]
    problems += [f"runq.{name} has a row but is no public function or view of runq"
                 for name in sorted(set(have) - set(want))]
    for name in sorted(set(have) & set(want)):
        wrong = []
        for listed_files, used_by, where in zip(have[name], want[name], (PGTAP, PYTEST)):
            wrong += [f"runq.{name}: {f} does not exist" for f in listed_files
                      if not (where / f).is_file()]
            wrong += [f"runq.{name}: {f} does not use it" for f in listed_files
                      if (where / f).is_file() and f not in used_by]
            wrong += [f"runq.{name}: {f} uses it but is not listed" for f in used_by
                      if f not in listed_files]
        if wrong:
            problems += wrong + [f"    the row as the files have it: {row(name, want[name])}"]
    assert not problems, "tests/README.md's map is out of date:\n" + "\n".join(problems)


def test_uses_tells_a_call_from_a_look_alike() -> None:
    # The map is only as true as uses(): it must tell a call from a table of
    # the same name, and a runq client's method from another object's.
    sql = "INSERT INTO runq.run_events (run_id) VALUES (1); SELECT * FROM runq.tool_calls(1);"
    assert not uses(sql, "run_events", "function", client=False)
    assert uses(sql, "tool_calls", "function", client=False)
    assert uses("SELECT * FROM runq.queue_stats", "queue_stats", "view", client=False)
    assert uses("assert client.heartbeat(run, 1)", "heartbeat", "function", client=True)
    assert not uses("client.heartbeat(run, 1)", "heartbeat", "function", client=False)
    assert not uses('pytest.fail("no")', "fail", "function", client=True)
