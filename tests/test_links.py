"""Links between the repository's documents, and names of documents it lacks.

Every relative link in every Markdown file (the README, CONTRIBUTING, the
changelog, docs/, the clients', the examples' and the tests' READMEs) must
lead to a file that exists and, for an anchor into a Markdown file, to a
heading that exists. GitHub shows these files as they are, and an editor
opens them; `make docs` checks the links of docs/ again, in the site, but
not those of the files outside it.

No file may name a document the repository does not contain: a design
document or a style guide that lives elsewhere, a seeds directory, the
records of design decisions. A reader who finds the name looks for the
document and finds nothing; the rules such documents held are written here
(docs/, CONTRIBUTING.md), and a file says them in its own words. What is
exempt, and why, is in frozen() below: the released sqitch scripts kept as
name@tag.sql, and the plan's lines up to its last tag, which stay byte for
byte.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest
from pgutil import ROOT, run

# A check of the repository's files alone: no server version changes it.
pytestmark = pytest.mark.once

# Never the repository's own documents: tools' and builds' output.
SKIP = {".git", ".venv", "node_modules", "site"}


def repository_files(root: Path = ROOT) -> list[str]:
    """Tracked files, and new ones git does not ignore, as they are on disk."""
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard").stdout
    return [name for name in listed.splitlines()
            if (root / name).is_file() and not SKIP.intersection(Path(name).parts)]


# -- reading Markdown ------------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# [text](target "title") and ![alt](target); the text may hold one level of
# brackets. A target in <...> may hold spaces.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)"
                    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
# pymdownx.snippets (mkdocs.yml): a file of the repository included whole;
# its path is from the repository's root.
SNIPPET = re.compile(r"^--8<--\s+\"([^\"]+)\"\s*$")
ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
HTML_ID = re.compile(r"<[^>]+\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def prose_lines(text: str, spans: bool = True) -> list[str]:
    """The lines of a Markdown text with code blocks, HTML comments and
    (unless not spans) code spans blanked: links inside them are examples,
    not links. The line count is kept, so line numbers stay right."""
    text = COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    out: list[str] = []
    fence = ""
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            out.append("")
        elif opened:
            fence = opened.group(1)
            out.append("")
        else:
            out.append(CODE_SPAN.sub(lambda m: " " * len(m.group()), line) if spans else line)
    return out


def heading_text(raw: str) -> str:
    """What a heading shows: inline code and link texts kept, markup dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("*", "")


def github_slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, each
    space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def mkdocs_slug(text: str) -> str:
    """Python-Markdown's (the site's): ASCII only, punctuation dropped, runs
    of spaces and hyphens one hyphen."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def headings(lines: list[str]) -> list[str]:
    found = []
    for i, line in enumerate(lines):
        atx = ATX.match(line)
        if atx:
            found.append(heading_text(atx.group(2)))
        elif (i and SETEXT.match(line) and lines[i - 1].strip()
              and not ATX.match(lines[i - 1]) and "|" not in lines[i - 1]
              and not re.match(r"^\s*([-*+]|\d+\.)\s", lines[i - 1])):
            found.append(heading_text(lines[i - 1].strip()))
    return found


def anchors(path: Path, root: Path, seen: frozenset[Path] = frozenset()) -> set[str]:
    """Every anchor a link into this Markdown file may name, on GitHub or in
    the site: its headings' slugs (a repeated heading numbered as each
    numbers it), ids of its HTML, and those of the files it includes."""
    text = path.read_text()
    lines = prose_lines(text, spans=False)  # a heading's code is part of its anchor
    found = set(HTML_ID.findall(text))
    counts: dict[tuple[str, str], int] = {}
    for heading in headings(lines):
        for kind, slug, sep in (("gh", github_slug(heading), "-"),
                                ("md", mkdocs_slug(heading), "_")):
            n = counts.get((kind, slug), 0)
            counts[kind, slug] = n + 1
            found.add(f"{slug}{sep}{n}" if n else slug)
    for line in lines:
        included = SNIPPET.match(line)
        if included and (root / included.group(1)).is_file():
            target = (root / included.group(1)).resolve()
            if target not in seen and target != path.resolve():
                found |= anchors(target, root, seen | {path.resolve()})
    return found


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link, image and include of a text."""
    found = []
    for number, line in enumerate(prose_lines(text), start=1):
        for m in INLINE.finditer(line):
            found.append((number, m.group(1).strip("<>")))
        for pattern in (REFERENCE, HTML_LINK):
            found.extend((number, m.group(1).strip("<>")) for m in pattern.finditer(line))
        included = SNIPPET.match(line)
        if included:
            found.append((number, "/" + included.group(1)))
    return found


def link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the relative links of one Markdown file: a target
    that does not exist, or an anchor its Markdown file does not have."""
    name = path.relative_to(root).as_posix()
    problems = []
    for number, target in link_targets(path.read_text()):
        if not target or SCHEME.match(target):
            continue  # a URL: not this repository's to check
        file_part, _, anchor = unquote(target).partition("#")
        if not file_part:
            dest = path
        elif file_part.startswith("/"):  # from the repository's root, as GitHub reads it
            dest = root / file_part.lstrip("/")
        else:
            dest = path.parent / file_part
        dest = dest.resolve()
        where = f"{name}:{number}: {target}"
        if not dest.is_relative_to(root.resolve()) or not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest, root):
            problems.append(f"{where}: {dest.relative_to(root.resolve()).as_posix()} "
                            f"has no heading with that anchor")
    return problems


def markdown_files() -> list[Path]:
    return [ROOT / name for name in repository_files() if name.endswith(".md")]


def test_markdown_files_are_found() -> None:
    # A listing gone wrong would check nothing and pass.
    names = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "CONTRIBUTING.md", "docs/index.md", "tests/README.md"} <= names


def test_every_relative_link_resolves() -> None:
    problems = [problem for path in markdown_files() for problem in link_problems(path)]
    assert not problems, "links to what the repository does not have:\n" + "\n".join(problems)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text(
        "# Other page\n\n## Read-only access: `runq_observer`\n\nSame\n----\n\n## Same\n")
    (tmp_path / "docs" / "part.md").write_text("# Included part\n")
    (tmp_path / "docs" / "page.md").write_text(
        "# Page\n\n--8<-- \"docs/part.md\"\n\n"
        "[ok](other.md) [ok](other.md#read-only-access-runq_observer) [ok](other.md#same-1)\n"
        "[ok](other.md#same_1) [ok](#included-part) [ok](/docs/other.md) [ok](https://x.org/a.md)\n"
        "`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n"
        "[bad](missing.md) ![bad](img/missing.png) [bad](other.md#no-such-heading)\n"
        "[bad]: ../../outside.md\n--8<-- \"docs/missing-part.md\"\n")
    problems = link_problems(tmp_path / "docs" / "page.md", root=tmp_path)
    assert [p.split(": ")[1] for p in problems] == [
        "missing.md", "img/missing.png", "other.md#no-such-heading", "../../outside.md",
        "/docs/missing-part.md"], problems


# -- names of documents the repository does not contain -----------------------------

# Spelled in parts, so that this file passes its own test.
NAMED = [
    # An upper-case document name (README.md, CONTRIBUTING.md, ...) is checked
    # against the files of the repository: see missing_documents.
    ("a seeds directory", re.compile(r"\bseeds" + "/")),
    # The design document or the style guide by its name alone, as prose
    # names it: "the D-E-S-I-G-N's rules", "(D-E-S-I-G-N: at most one)".
    ("a design document or a style guide",
     re.compile(r"\b(?:" + "DES" "IGN|STY" "LE" + r")(?=['’]s\b|:|\s)")),
    ("a design decision's record", re.compile(r"\bdecision\s+records?\b", re.IGNORECASE)),
    ("an architecture decision's record",
     re.compile(r"(?<![\w+/=-])" + "A" "DR" + r"s?(?![\w+/=])")),
]
DOCUMENT = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_-]*\.md)\b")


def frozen() -> tuple[set[str], int]:
    """What stays byte for byte, so may keep a name this test refuses:

    * the scripts of released changes that were reworked, kept as
      deploy|revert|verify/name@tag.sql: sqitch deploys and reverts exactly
      them on databases of that release, and a released change is never
      edited (CONTRIBUTING.md);
    * the lines of sqitch.plan up to its last tag: sqitch hashes a change's
      and a tag's note into the id a deployed database records, so editing
      one breaks the upgrade of every database of that release.

    Returns the scripts and the number of frozen lines of the plan."""
    scripts = {p.relative_to(ROOT).as_posix()
               for d in ("deploy", "revert", "verify") for p in (ROOT / d).glob("*@*.sql")}
    lines = (ROOT / "sqitch.plan").read_text().splitlines()
    last_tag = max((i for i, line in enumerate(lines) if line.startswith("@")), default=-1)
    return scripts, last_tag + 1


def missing_documents(text: str, documents: set[str]) -> list[tuple[int, str]]:
    """(line number, what) of each name in text of a document not among documents
    (the base names of the repository's files)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for m in DOCUMENT.finditer(line):
            if m.group(1) not in documents:
                found.append((number, m.group(1)))
        for what, pattern in NAMED:
            found.extend((number, f"{what} ({m.group()})") for m in pattern.finditer(line))
    return found


def test_no_file_names_a_document_the_repository_does_not_have() -> None:
    files = repository_files()
    documents = {Path(name).name for name in files}
    scripts, plan_lines = frozen()
    # Generated files repeat the frozen scripts' lines (sql/runq.sql replays them).
    frozen_lines = {line.strip() for name in scripts
                    for line in (ROOT / name).read_text().splitlines() if line.strip()}
    found = []
    for name in files:
        if name in scripts:
            continue
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue  # not text
        lines = text.splitlines()
        for number, what in missing_documents(text, documents):
            if name == "sqitch.plan" and number <= plan_lines:
                continue
            if name.startswith("sql/") and lines[number - 1].strip() in frozen_lines:
                continue
            found.append(f"{name}:{number}: {what}")
    assert not found, ("names of documents the repository does not contain (say what they "
                       "said, or point to docs/ or CONTRIBUTING.md):\n" + "\n".join(found))


@pytest.mark.parametrize("template", [
    "-- The contract of {D}.md, section Schedules", "see {S}.md \"Static SQL only\"",
    "loaded from {s}/", "as decision {R} 004 says", "the {A} on leases",
    "({A} \"The Postgres run queue\")", "an oracle of the {D}'s rules", "({D}: at most one)"])
def test_a_missing_document_is_found(template: str) -> None:
    text = template.format(D="DES" "IGN", S="STY" "LE", s="se" "eds", A="A" "DR", R="record")
    assert missing_documents(text, {"README.md", "CONTRIBUTING.md"})


@pytest.mark.parametrize("text", [
    "README.md and CONTRIBUTING.md say how", "bench/results/quick.md", "a padded string",
    "sha512-Xw+ADRq/9z==", "the design of admission", "records of decisions",
    "seedsman", "a design of its own", "OUTSIDE = (\"{D}\" + \".md\", \"{S}\" + \".md\")"])
def test_what_is_not_a_missing_document_passes(text: str) -> None:
    text = text.format(D="DES" "IGN", S="STY" "LE")
    assert not missing_documents(text, {"README.md", "CONTRIBUTING.md"})
