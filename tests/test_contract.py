"""docs/contract.md is the contract of everything a runq role may use, and
this test holds it to the catalog of a deployed database:

- every function and view that one of the roles runq_client, runq_worker,
  runq_admin and runq_observer may use, and every other one of schema runq
  whose name does not start with '_', has a section of its own, headed by its
  qualified name (the heading a reader links to);
- a function's signature in the contract (a line of a ```sql block that starts
  with its qualified name and an opening parenthesis, up to the end of its
  RETURNS clause) has the catalog's argument names, types and defaults, in
  order, and its result type; and the contract gives no signature for a
  function the catalog does not have;
- a view's section opens with a table of its columns and their types, in the
  catalog's order;
- the grants table (section "Roles and grants") marks exactly the roles that
  may execute each function or select from each view;
- the page links only to files of docs/ and to its own headings, as an MkDocs
  site built with --strict requires, and cites no document outside the
  repository.

Types are compared by meaning (timestamptz is timestamp with time zone), and
defaults without the casts the catalog adds ('{}' is '{}'::jsonb).
"""
import re
import unicodedata
from dataclasses import dataclass

import psycopg
import pytest
from pgutil import ROOT

DOCS = ROOT / "docs"
CONTRACT = DOCS / "contract.md"
ROLES = ("runq_client", "runq_worker", "runq_admin", "runq_observer")

TYPE_ALIASES = {"timestamptz": "timestamp with time zone", "int": "integer", "int4": "integer",
                "int8": "bigint", "int2": "smallint", "bool": "boolean",
                "varchar": "character varying"}


@dataclass(frozen=True)
class Function:
    name: str
    arguments: tuple[tuple[str, str, str | None], ...]  # (name, type, default)
    result: str
    roles: frozenset[str]


@dataclass(frozen=True)
class View:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, type)
    roles: frozenset[str]


@dataclass(frozen=True)
class Catalog:
    functions: dict[str, Function]
    views: dict[str, View]


# ---------------------------------------------------------------------------
# Reading SQL text: argument lists and result types, as the catalog prints
# them (pg_get_function_arguments, pg_get_function_result) and as the
# contract writes them.
# ---------------------------------------------------------------------------

def closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at text[start],
    quoted strings skipped."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parentheses in {text[start:start + 80]!r}")


def split_top(text: str) -> list[str]:
    """text split at the commas outside parentheses and quotes."""
    parts, depth, quoted, current = [], 0, False, ""
    for ch in text:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def norm_type(text: str) -> str:
    text = " ".join(text.split()).lower()
    base, brackets = re.fullmatch(r"(.*?)((?:\[\])*)", text).groups()  # type: ignore[union-attr]
    return TYPE_ALIASES.get(base, base) + brackets


def norm_default(text: str | None) -> str | None:
    """A default without the casts the catalog prints after it."""
    if text is None:
        return None
    text = " ".join(text.split())
    while True:
        bare = re.sub(r"::[a-z_][\w ]*(?:\[\])*$", "", text, flags=re.IGNORECASE)
        if bare == text:
            return text
        text = bare


ARGUMENT = re.compile(r"(?:(?:IN|VARIADIC)\s+)?(\w+)\s+(.+?)(?:\s+DEFAULT\s+(.+))?",
                      re.IGNORECASE | re.DOTALL)


def arguments(text: str) -> tuple[tuple[str, str, str | None], ...]:
    """An argument list's (name, type, default) triples."""
    found = []
    for part in split_top(text):
        m = ARGUMENT.fullmatch(part)
        if not m:
            raise ValueError(f"not an argument: {part!r}")
        found.append((m.group(1), norm_type(m.group(2)), norm_default(m.group(3))))
    return tuple(found)


def result(text: str) -> str:
    """A result type in one spelling: TABLE(name type, ...), SETOF type or type."""
    text = " ".join(text.split())
    if text.upper().startswith("TABLE"):
        inner = text[text.index("(") + 1:closing(text, text.index("("))]
        return "TABLE(" + ", ".join(f"{n} {t}" for n, t, _ in arguments(inner)) + ")"
    if text.upper().startswith("SETOF "):
        return "SETOF " + norm_type(text[6:])
    return norm_type(text)


# ---------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------

def catalog(conn: psycopg.Connection) -> Catalog:
    """The public functions and views of schema runq, with the roles that may
    use each: those whose name does not start with '_', and any other that a
    role may use."""
    roles = list(ROLES)
    functions = {}
    for name, args, res, granted in conn.execute(
            """SELECT p.proname::text, pg_catalog.pg_get_function_arguments(p.oid),
                      pg_catalog.pg_get_function_result(p.oid),
                      ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r
                             WHERE pg_catalog.has_function_privilege(r, p.oid, 'EXECUTE'))
                 FROM pg_catalog.pg_proc AS p
                WHERE p.pronamespace = 'runq'::regnamespace""", {"roles": roles}).fetchall():
        if name.startswith("_") and not granted:
            continue
        assert name not in functions, f"runq has two functions named {name}: compare them by hand"
        functions[name] = Function(name, arguments(args), result(res), frozenset(granted))
    views = {}
    for name, columns, types, granted in conn.execute(
            """SELECT c.relname::text,
                      ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute AS a
                             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                             ORDER BY a.attnum),
                      ARRAY(SELECT pg_catalog.format_type(a.atttypid, a.atttypmod)
                              FROM pg_catalog.pg_attribute AS a
                             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                             ORDER BY a.attnum),
                      ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r
                             WHERE pg_catalog.has_table_privilege(r, c.oid, 'SELECT'))
                 FROM pg_catalog.pg_class AS c
                WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('v', 'm')""",
            {"roles": roles}).fetchall():
        if name.startswith("_") and not granted:
            continue
        views[name] = View(name, tuple(zip(columns, map(norm_type, types), strict=True)),
                           frozenset(granted))
    return Catalog(functions, views)


# ---------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------

FENCE = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
SQL_BLOCK = re.compile(r"^```sql[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def prose(text: str) -> str:
    """The page without its fenced code blocks (a '#' there is no heading)."""
    return FENCE.sub("", text)


def headings(text: str) -> list[tuple[int, str]]:
    """(level, text) of each heading, without its backticks and asterisks."""
    return [(len(m.group(1)), re.sub(r"[`*]", "", m.group(2)))
            for m in HEADING.finditer(prose(text))]


def slug(title: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc.slugify)."""
    title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    title = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", title)


def section(text: str, title: str) -> str | None:
    """The text under the heading `title`, up to the next heading of its level
    or above; None when there is no such heading."""
    body = prose(text)
    for m in HEADING.finditer(body):
        if re.sub(r"[`*]", "", m.group(2)) != title:
            continue
        level = len(m.group(1))
        end = len(body)
        for n in HEADING.finditer(body, m.end()):
            if len(n.group(1)) <= level:
                end = n.start()
                break
        return body[m.end():end]
    return None


def signatures(text: str) -> dict[str, list[tuple[tuple[tuple[str, str, str | None], ...], str]]]:
    """Each function's signatures in the contract's sql blocks: name ->
    [(arguments, result)]."""
    found: dict[str, list[tuple[tuple[tuple[str, str, str | None], ...], str]]] = {}
    for block in SQL_BLOCK.finditer(text):
        sql = block.group(1)
        for m in re.finditer(r"^runq\.(\w+)\(", sql, re.MULTILINE):
            close = closing(sql, m.end() - 1)
            args = arguments(sql[m.end():close])
            rest = sql[close + 1:]
            returns = re.match(r"\s*RETURNS\s+", rest, re.IGNORECASE)
            if not returns:
                res = "(no RETURNS clause)"
            else:
                tail = rest[returns.end():]
                if tail.upper().startswith("TABLE"):
                    res = result(tail[:closing(tail, tail.index("(")) + 1])
                else:
                    res = result(tail.splitlines()[0])
            found.setdefault(m.group(1), []).append((args, res))
    return found


def grants_table(text: str) -> tuple[list[str], dict[str, frozenset[str]]]:
    """The grants table of section "Roles and grants": (its role columns,
    name -> the roles it marks)."""
    body = section(text, "Roles and grants") or ""
    roles: list[str] = []
    marked: dict[str, frozenset[str]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| function or view |"):
            roles = cells[1:]
            continue
        m = re.fullmatch(r"`runq\.(\w+)`(?: \(view\))?", cells[0]) if line.startswith("|") else None
        if m and roles:
            marked[m.group(1)] = frozenset(r for r, c in zip(roles, cells[1:], strict=False) if c)
    return roles, marked


def view_columns(text: str, name: str) -> tuple[tuple[str, str], ...]:
    """The (column, type) rows of the first table in the view's section."""
    body = section(text, f"runq.{name}") or ""
    rows = []
    for line in body.splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|\s*`([^`]+)`\s*\|", line)
        if m:
            rows.append((m.group(1), norm_type(m.group(2))))
        elif rows:
            break
    return tuple(rows)


# ---------------------------------------------------------------------------
# The checks, as lists of problems (so that the tests of the tests below can
# show that each one finds what it is for)
# ---------------------------------------------------------------------------

def missing_sections(text: str, cat: Catalog) -> list[str]:
    titles = {title for _, title in headings(text)}
    return [f"runq.{name} has no section headed runq.{name}"
            for name in sorted({*cat.functions, *cat.views}) if f"runq.{name}" not in titles]


def wrong_signatures(text: str, cat: Catalog) -> list[str]:
    written = signatures(text)
    problems = []
    for name, fn in sorted(cat.functions.items()):
        given = written.get(name, [])
        if not given:
            problems.append(f"runq.{name} has no signature in a sql block")
            continue
        for args, res in given:
            if [a[0] for a in args] != [a[0] for a in fn.arguments]:
                problems.append(f"runq.{name}: argument names {[a[0] for a in args]}, "
                                f"the catalog's are {[a[0] for a in fn.arguments]}")
            elif args != fn.arguments:
                problems.append(f"runq.{name}: arguments {args}, the catalog's are {fn.arguments}")
            if res != fn.result:
                problems.append(f"runq.{name}: RETURNS {res}, the catalog's is {fn.result}")
    problems += [f"runq.{name} has a signature here but is no public function of runq"
                 for name in sorted(set(written) - set(cat.functions))]
    return problems


def wrong_view_columns(text: str, cat: Catalog) -> list[str]:
    return [f"runq.{name}: the section's table lists {list(view_columns(text, name))}, "
            f"the view's columns are {list(view.columns)}"
            for name, view in sorted(cat.views.items()) if view_columns(text, name) != view.columns]


def wrong_grants(text: str, cat: Catalog) -> list[str]:
    roles, marked = grants_table(text)
    if sorted(roles) != sorted(ROLES):
        return [f"the grants table's role columns are {roles}, not {list(ROLES)}"]
    actual = {name: fn.roles for name, fn in cat.functions.items()}
    actual.update({name: view.roles for name, view in cat.views.items()})
    problems = [f"runq.{name} has no row in the grants table"
                for name in sorted(set(actual) - set(marked))]
    problems += [f"runq.{name} has a row in the grants table but is no public function or view"
                 for name in sorted(set(marked) - set(actual))]
    problems += [f"runq.{name}: the grants table marks {sorted(marked[name])}, "
                 f"the catalog grants {sorted(actual[name])}"
                 for name in sorted(set(actual) & set(marked)) if marked[name] != actual[name]]
    return problems


def bad_links(text: str) -> list[str]:
    anchors = {slug(title) for _, title in headings(text)}
    problems = []
    for m in re.finditer(r"\]\(([^)\s]*)\)", prose(text)):
        target = m.group(1)
        path, _, anchor = target.partition("#")
        if re.match(r"[a-z]+:", path):
            continue  # a URL: not a file of the site
        if not path:
            if anchor not in anchors:
                problems.append(f"link {target!r}: no heading of this page has that anchor")
        elif path.startswith("/") or ".." in path.split("/") or not (DOCS / path).is_file():
            problems.append(f"link {target!r}: not a file of docs/")
    return problems


# Built from parts, so that this file cites nothing either.
OUTSIDE = ("DESIGN" + ".md", "STYLE" + ".md", "seeds" + "/", "decision " + "record")


def outside_citations(text: str) -> list[str]:
    return [f"the contract cites {word!r}" for word in OUTSIDE if word.lower() in text.lower()]


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------

@pytest.fixture
def cat(conn: psycopg.Connection) -> Catalog:
    found = catalog(conn)
    assert len(found.functions) > 30 and found.views, "runq's public surface was not found"
    return found


@pytest.fixture(scope="module")
def contract() -> str:
    return CONTRACT.read_text()


def report(problems: list[str]) -> None:
    assert not problems, "docs/contract.md is out of date:\n" + "\n".join(problems)


def test_every_function_and_view_has_its_section(contract: str, cat: Catalog) -> None:
    report(missing_sections(contract, cat))


def test_signatures_are_the_catalogs(contract: str, cat: Catalog) -> None:
    report(wrong_signatures(contract, cat))


def test_views_list_their_columns(contract: str, cat: Catalog) -> None:
    report(wrong_view_columns(contract, cat))


def test_grants_table_is_the_catalogs(contract: str, cat: Catalog) -> None:
    report(wrong_grants(contract, cat))


def test_links_stay_in_the_site(contract: str) -> None:
    report(bad_links(contract) + outside_citations(contract))


# The checks find what they are for: each mutation of the contract below must
# be reported.

def first_signature(text: str) -> re.Match[str]:
    m = re.search(r"^runq\.(\w+)\((\s*)(\w+)", text, re.MULTILINE)
    assert m, "the contract has no signature"
    return m


def test_a_missing_section_is_found(contract: str, cat: Catalog) -> None:
    name = first_signature(contract).group(1)
    text = re.sub(rf"^### runq\.{name}$", "### elsewhere", contract, flags=re.MULTILINE)
    assert any(f"runq.{name} has no section" in p for p in missing_sections(text, cat))


def test_a_wrong_argument_name_is_found(contract: str, cat: Catalog) -> None:
    m = first_signature(contract)
    text = contract[:m.start(3)] + m.group(3) + "_renamed" + contract[m.end(3):]
    assert any("argument names" in p for p in wrong_signatures(text, cat))


def test_a_wrong_type_default_or_result_is_found(contract: str, cat: Catalog) -> None:
    assert wrong_signatures(contract.replace("DEFAULT 1000", "DEFAULT 100", 1), cat)
    assert wrong_signatures(contract.replace("RETURNS boolean", "RETURNS bigint", 1), cat)
    assert wrong_signatures(contract.replace(" bigint,", " integer,", 1), cat)


def test_a_missing_signature_is_found(contract: str, cat: Catalog) -> None:
    m = first_signature(contract)
    text = contract[:m.start()] + "-- " + contract[m.start():]
    assert any(f"runq.{m.group(1)} has no signature" in p for p in wrong_signatures(text, cat))


def test_a_wrong_view_column_or_grant_is_found(contract: str, cat: Catalog) -> None:
    view = sorted(cat.views)[0]
    column = cat.views[view].columns[0][0]
    body = section(contract, f"runq.{view}") or ""
    assert body, f"no section runq.{view}"
    text = contract.replace(body, body.replace(f"| `{column}` |", "| `renamed` |", 1), 1)
    assert wrong_view_columns(text, cat)
    row = re.search(r"^\| `runq\.\w+` \| ✓ \|", contract, re.MULTILINE)
    assert row, "no row of the grants table marks runq_client"
    text = contract[:row.start()] + row.group().replace("✓", " ", 1) + contract[row.end():]
    assert wrong_grants(text, cat)


def test_a_link_out_of_the_site_is_found() -> None:
    assert bad_links("[the schema](../sql/schema.sql)")
    assert bad_links("[gone](nothing-here.md)")
    assert bad_links("## A heading\n[see](#another-heading)")
    assert not bad_links("## A heading\n[see](#a-heading) and [the API](API.md)")
