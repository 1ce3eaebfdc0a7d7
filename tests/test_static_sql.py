"""Static SQL only (CONTRIBUTING.md "Static SQL only"): no deploy script may
EXECUTE a built string. plpgsql_check can check a static statement and
PL/pgSQL caches its plan; a string built with format() or || is checked by
nobody, planned on every call and is where SQL injection lives.

The scanner reads SQL the way the server does, as far as this question needs:
comments are dropped, quoted literals become an empty literal (so words in
messages, COMMENT texts and RAISE formats are not code), and a dollar-quoted
string is code only where it is a body: after AS (CREATE FUNCTION) or DO.
What remains is searched for the keyword EXECUTE that starts a PL/pgSQL
dynamic statement, that is EXECUTE not followed by ON (GRANT/REVOKE EXECUTE
ON ...) nor FUNCTION/PROCEDURE (CREATE TRIGGER ... EXECUTE FUNCTION). Every
such statement is reported, with what its string is built from (format(),
||, a variable or call, or a constant literal): a constant string gains
nothing from EXECUTE and escapes plpgsql_check just the same, so it is
refused too.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pgutil import ROOT

# A check of the repository's files alone: no server version changes it.
pytestmark = pytest.mark.once

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
_EXECUTE = re.compile(r"\bEXECUTE\b", re.IGNORECASE)
_NOT_DYNAMIC = re.compile(r"\s*(ON|FUNCTION|PROCEDURE)\b", re.IGNORECASE)
_BODY_OPENER = re.compile(r"\b(AS|DO)\s*$", re.IGNORECASE)


def code_only(text: str) -> str:
    """`text` with comments removed and string literals emptied; function
    bodies ($$...$$ after AS or DO) are kept as code. Newlines are kept so
    line numbers stay right."""
    out: list[str] = []
    i, n = 0, len(text)
    bodies: list[str] = []  # dollar tags of the bodies we are inside
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2  # block comments nest in PostgreSQL
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "'":
            j = i + 1
            while j < n:
                if text[j] == "'" and text.startswith("''", j):
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    j += 1
            out.append("''" + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "$" and (m := _DOLLAR.match(text, i)) and not (i and text[i - 1].isalnum()):
            tag = m.group(0)
            if bodies and bodies[-1] == tag:  # the end of a body we are in
                bodies.pop()
                out.append(" ")
                i = m.end()
            elif _BODY_OPENER.search("".join(out[-20:])):
                bodies.append(tag)  # a body: its text is code
                out.append(" ")
                i = m.end()
            else:  # a dollar-quoted literal
                j = text.find(tag, m.end())
                j = n if j < 0 else j
                out.append("''" + "\n" * text.count("\n", i, j))
                i = j + len(tag)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def dynamic_executes(text: str) -> list[tuple[int, str, str]]:
    """(line, statement, what the string is built from) for every PL/pgSQL
    EXECUTE of a string in `text`."""
    code = code_only(text)
    found = []
    for m in _EXECUTE.finditer(code):
        if _NOT_DYNAMIC.match(code, m.end()):
            continue
        end = code.find(";", m.end())
        stmt = " ".join(code[m.start(): len(code) if end < 0 else end].split())
        arg = re.split(r"\b(?:INTO|USING)\b", stmt[len("EXECUTE"):], flags=re.IGNORECASE)[0]
        arg = arg.strip()
        if re.match(r"format\s*\(", arg, re.IGNORECASE):
            built = "format()"
        elif "||" in arg:
            built = "||"
        elif arg == "''":
            built = "a constant string"
        else:
            built = "a variable or call"
        found.append((code.count("\n", 0, m.start()) + 1, stmt, built))
    return found


def deploy_scripts() -> list[Path]:
    return sorted((ROOT / "deploy").glob("*.sql"))


def test_there_are_deploy_scripts_with_plpgsql() -> None:
    # The scan below must have something to read: the function bodies.
    bodies = [p for p in deploy_scripts() if "LANGUAGE plpgsql" in p.read_text()]
    assert len(bodies) >= 15, bodies


@pytest.mark.parametrize("path", [p for p in deploy_scripts() if "LANGUAGE plpgsql" in p.read_text()],
                         ids=lambda p: p.name)
def test_scanner_reads_function_bodies_as_code(path: Path) -> None:
    # Otherwise the scan would be vacuous: a body read as a literal hides
    # every EXECUTE in it. Each body declares BEGIN ... END as code, while
    # COMMENT texts and messages are gone.
    code = code_only(path.read_text())
    assert re.search(r"\bBEGIN\b(?!;)", code), path.name
    assert re.search(r"\bEND\b\s*;?\s*$", code, re.MULTILINE), path.name
    assert "Raises" not in code  # the COMMENT ON FUNCTION text is a literal


@pytest.mark.parametrize("path", deploy_scripts(), ids=lambda p: p.name)
def test_deploy_script_executes_no_built_string(path: Path) -> None:
    found = dynamic_executes(path.read_text())
    assert not found, "\n".join(
        f"{path.relative_to(ROOT)}:{line}: EXECUTE of {built}: {stmt}"
        for line, stmt, built in found)


# -- the scanner bites: samples it must catch, and samples it must let pass ----

BUILT = {
    "format": "BEGIN\n    EXECUTE format('SELECT * FROM runq.%I', v_table) INTO v_row;\nEND",
    "format lower case, split over lines":
        "begin\n  execute\n    format(\n 'DELETE FROM %s', t);\nend",
    "concatenation": "BEGIN EXECUTE 'SELECT ' || quote_ident(v_col) || ' FROM runq.runs'; END",
    "concatenation after a constant": "BEGIN EXECUTE $q$SELECT $q$ || v_col; END",
    "a variable": "BEGIN EXECUTE v_sql USING run_id; END",
    "a call": "BEGIN EXECUTE runq._build(v) INTO v_n; END",
    "a constant literal": "BEGIN EXECUTE 'TRUNCATE runq.runs'; END",
}


@pytest.mark.parametrize("body", BUILT.values(), ids=list(BUILT))
def test_scanner_catches_a_built_string(body: str) -> None:
    script = ("BEGIN;\nCREATE FUNCTION runq.f(v_table text) RETURNS void LANGUAGE plpgsql\n"
              f"AS $$\n{body}\n$$;\nCOMMIT;\n")
    found = dynamic_executes(script)
    assert len(found) == 1, found
    assert found[0][0] >= 4  # the line inside the body, not the header


def test_scanner_catches_a_named_body_and_a_do_block() -> None:
    named = "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $fn$\nBEGIN EXECUTE v; END\n$fn$;"
    do = "DO $$\nBEGIN\n  EXECUTE format('GRANT USAGE ON SCHEMA runq TO %I', r);\nEND $$;"
    assert [(b, ln) for ln, _, b in dynamic_executes(named)] == [("a variable or call", 2)]
    assert [(b, ln) for ln, _, b in dynamic_executes(do)] == [("format()", 3)]


PASSES = {
    "GRANT EXECUTE": "GRANT EXECUTE ON FUNCTION runq.claim(integer[]) TO runq_worker;",
    "REVOKE EXECUTE": "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA runq FROM PUBLIC;",
    "trigger": "CREATE TRIGGER t AFTER INSERT ON runq.runs FOR EACH ROW EXECUTE FUNCTION runq.f();",
    "line comment": "-- EXECUTE format('x %s', v) is forbidden\nSELECT 1;",
    "block comment": "/* never /* nested */ EXECUTE v_sql; */ SELECT 1;",
    "message text": "DO $$ BEGIN RAISE NOTICE 'do not EXECUTE v_sql here'; END $$;",
    "comment text": "COMMENT ON FUNCTION f() IS $c$Never EXECUTE format(...) || v.$c$;",
    "a quoted quote": "SELECT 'it''s EXECUTE v || w';",
    "static statements": ("CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$\n"
                          "BEGIN PERFORM 1; UPDATE runq.runs SET updated_at = now(); END\n$$;"),
}


@pytest.mark.parametrize("script", PASSES.values(), ids=list(PASSES))
def test_scanner_lets_static_sql_pass(script: str) -> None:
    assert dynamic_executes(script) == []
