"""Every public runq function's COMMENT names the SQLSTATEs it raises, all of
them and only those. docs/API.md prints the COMMENTs, so a state left out
there is a state a client is never told about.

Named: the states in the comment's "Raises ..." sentence (`Raises RQ003 (no
such run), 22023 (bad argument).`), read from the catalog of a deployed
database (obj_description), where docs/API.md reads them.

Provoked: the states the pgTAP suite (tests/pgtap/*.sql) proves a function
raises, from its throws_ok() calls. pgTAP's forms are throws_ok(sql, errcode,
errmsg, description), throws_ok(sql, errcode[, errmsg]) when the second
argument is exactly five characters, and throws_ok(sql[, errmsg[,
description]]); sql is the statement as a string (here also the format
string of format(...)) or the name of a PREPAREd statement. A call counts for
the runq.<function>( that statement calls. throws_like, throws_ilike,
throws_matching and throws_imatching match the message only and name no
state, and an error caught by hand (a pg_temp helper that returns SQLSTATE)
is not read either: neither counts here.

Both directions must hold: a state the comment names that no throws_ok
provokes is a claim no test backs (add the throws_ok), and a state a
throws_ok provokes that the comment leaves out is under-documented (fix the
COMMENT in its sqitch change, then `make docs`).

Out of scope: 42501 (insufficient privilege). PostgreSQL raises it, not runq,
when a role without EXECUTE calls a function (17_privileges.sql proves those
grants), and a function's comment lists its grants in docs/API.md instead.
"""
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psycopg
from pgutil import ROOT, runq_calls

PGTAP = ROOT / "tests" / "pgtap"
OUT_OF_SCOPE = {"42501"}

# SQL as the server splits it, as far as finding calls and their arguments
# needs: comments dropped, a quoted or dollar-quoted string one token.
TOKEN = re.compile(r"""
      (?P<comment> --[^\n]* | /\*.*?\*/ )
    | (?P<string> '(?:[^']|'')*' | \$\$.*?\$\$ | \$(?P<tag>[A-Za-z_]\w*)\$.*?\$(?P=tag)\$ )
    | (?P<punct> [(),;] )
    | (?P<word> "(?:[^"]|"")*" | \$\d+ | [^\s'"$(),;]+ | \$ )
    """, re.DOTALL | re.VERBOSE)

Token = tuple[str, str, int]  # kind, text, offset in the file

THROWS = {"throws_ok", "throws_like", "throws_ilike", "throws_matching", "throws_imatching"}


def tokens(text: str) -> list[Token]:
    """Each token but comments."""
    return [(str(m.lastgroup), m.group(), m.start())
            for m in TOKEN.finditer(text) if m.lastgroup != "comment"]


def value(token: str) -> str:
    """The text a string token stands for."""
    if token.startswith("$"):
        tag = token[:token.index("$", 1) + 1]
        return token[len(tag):-len(tag)]
    return token[1:-1].replace("''", "'")


def calls(toks: list[Token], names: set[str]) -> Iterator[tuple[str, int, list[list[Token]]]]:
    """Each call of a function in names: (name, offset, its arguments, each a
    list of tokens)."""
    for i, (kind, text, offset) in enumerate(toks):
        if kind != "word" or text.lower() not in names:
            continue
        if i + 1 >= len(toks) or toks[i + 1][1] != "(":
            continue
        args: list[list[Token]] = [[]]
        depth = 0
        for tok in toks[i + 2:]:
            if tok[1] == "(":
                depth += 1
            elif tok[1] == ")":
                if depth == 0:
                    break
                depth -= 1
            elif tok[1] == "," and depth == 0:
                args.append([])
                continue
            args[-1].append(tok)
        yield text.lower(), offset, args


def prepared(toks: list[Token]) -> dict[str, str]:
    """PREPARE name [(types)] AS statement: the statement's text by name."""
    out = {}
    for i in range(len(toks) - 2):
        if toks[i][1].upper() != "PREPARE" or toks[i + 2][1].upper() not in ("(", "AS"):
            continue  # DEALLOCATE PREPARE name, PREPARE TRANSACTION 'id'
        start = next(j for j in range(i + 2, len(toks)) if toks[j][1].upper() == "AS") + 1
        end = next((j for j in range(start, len(toks)) if toks[j][1] == ";"), len(toks))
        out[toks[i + 1][1].lower()] = " ".join(t[1] for t in toks[start:end])
    return out


def errcode(name: str, args: list[list[Token]]) -> str | None:
    """The SQLSTATE a throws_* call asserts, or None when it names none."""
    if name != "throws_ok" or len(args) < 2 or len(args[1]) != 1:
        return None
    kind, text, _ = args[1][0]
    code = value(text) if kind == "string" else text  # pgTAP takes 22023 unquoted too
    if len(args) == 4 or len(code) == 5:
        return None if code.upper() == "NULL" else code.upper()
    return None


def provoked(public: set[str], files: list[Path]) -> dict[str, dict[str, list[str]]]:
    """function -> SQLSTATE -> the places ('file:line') whose throws_ok provokes it."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in files:
        text = path.read_text()
        toks = tokens(text)
        statements = prepared(toks)
        for name, offset, args in calls(toks, THROWS):
            code = errcode(name, args)
            if code is None or code in OUT_OF_SCOPE:
                continue
            sql = " ".join(value(t[1]) for t in args[0] if t[0] == "string")
            sql = statements.get(sql.strip().lower(), sql)
            called = runq_calls(sql) & public
            line = text.count("\n", 0, offset) + 1
            where = f"{path.name}:{line}"
            assert len(called) <= 1, (
                f"{where}: the statement thrown calls {sorted(called)}: one runq function "
                "per throws_ok, or nobody can tell which one raised")
            for fn in called:
                found[fn][code].append(where)
    return found


def named(comment: str | None) -> set[str]:
    """The SQLSTATEs of a comment's 'Raises X (why), Y (why).' sentence."""
    _, _, raises = (comment or "").partition("Raises ")
    return set(re.findall(r"\b([0-9A-Z]{5}) \(", raises)) - OUT_OF_SCOPE


def comments(conn: psycopg.Connection) -> dict[str, set[str]]:
    """Public function -> the SQLSTATEs its comments name (every overload's)."""
    out: dict[str, set[str]] = defaultdict(set)
    for fn, comment in conn.execute(
            """SELECT p.proname, obj_description(p.oid, 'pg_proc') FROM pg_catalog.pg_proc AS p
                WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'"""):
        out[fn] |= named(comment)
    return out


def test_every_comment_names_the_states_pgtap_provokes(conn: psycopg.Connection) -> None:
    documented = comments(conn)
    found = provoked(set(documented), sorted(PGTAP.glob("*.sql")))
    rows = []
    for fn in sorted(documented):
        states = found.get(fn, {})
        left_out = sorted(set(states) - documented[fn])
        unproven = sorted(documented[fn] - set(states))
        if left_out or unproven:
            rows.append(f"| {fn} | "
                        + ", ".join(f"{s} ({states[s][0]})" for s in left_out)
                        + " | " + ", ".join(unproven) + " |")
    assert not rows, (
        "COMMENTs and pgTAP disagree on the SQLSTATEs a function raises:\n"
        "| function | provoked by pgTAP, missing from the comment | named in the comment, "
        "provoked by no pgTAP throws_ok |\n| --- | --- | --- |\n" + "\n".join(rows))


SAMPLE = """
-- SELECT throws_ok('SELECT runq.heartbeat(NULL, 1)', '22023');   a comment: not a call
SELECT throws_ok('SELECT runq.heartbeat(-1, 1)', 'RQ003', NULL, 'four arguments');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"a": "b, c)"}')$$, :r), 'RQ004');
SELECT throws_ok($x$SELECT * FROM runq.claim('{}')$x$, 22023, 'the message');
PREPARE stale AS SELECT runq.complete(1, -1);
SELECT throws_ok('stale', 'RQ003', NULL, 'a prepared statement');
SELECT throws_ok('SELECT runq.cancel(-1)', 'not a state: a message', 'a description');
SELECT throws_ok('SELECT runq.cancel(-1)', NULL, NULL, 'any error');
SELECT throws_like('SELECT runq.fail(-1, 1, NULL)', '%not found%', 'a message only');
SELECT throws_ok('SELECT * FROM runq.sweep()', '42501', NULL, 'no EXECUTE: out of scope');
"""


def test_the_pgtap_reader_finds_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.sql"
    sample.write_text(SAMPLE)
    public = {"heartbeat", "deliver_input", "claim", "complete", "cancel", "fail", "sweep"}
    found = provoked(public, [sample])
    assert {fn: dict(states) for fn, states in found.items()} == {
        "heartbeat": {"RQ003": ["sample.sql:3"]},
        "deliver_input": {"RQ004": ["sample.sql:4"]},
        "claim": {"22023": ["sample.sql:5"]},
        "complete": {"RQ003": ["sample.sql:7"]},
    }


def test_the_comment_reader_takes_the_raises_sentence() -> None:
    assert named("Claims runs of a class in 0..32767. Raises RQ003 (no such run), "
                 "22023 (a class outside 0..32767, max_runs below 1).") == {"RQ003", "22023"}
    assert named("Returns the run.") == set()
