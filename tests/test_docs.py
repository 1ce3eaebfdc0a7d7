"""The documentation that is generated or copied from the code stays current.

docs/API.md is generated from the catalog (scripts/gen-api-doc); a change to a
function's signature, grants or COMMENT must come with `make docs`.

docs/reference/cli.md shows the help of every `runq` subcommand; a change to
the command line must come with its help pasted there. (`make docs` checks the
site's links; tests/test_links.py checks every Markdown file's.)
"""
import json
import os
import re
import subprocess
import sys

import pytest
from pgutil import ROOT, run


def test_api_doc_is_current(db_url: str) -> None:
    # db_url is a clone of the session's database loaded from sql/runq.sql.
    generated = run(sys.executable, "scripts/gen-api-doc", "--db", db_url, "-").stdout
    path = ROOT / "docs" / "API.md"
    fresh = path.exists() and path.read_text() == generated
    assert fresh, "docs/API.md is stale: run `make docs` and commit it"


CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
# ```text
# $ runq schedule add --help
# usage: ...
# ```
HELP_BLOCK = re.compile(r"^```text\n\$ (runq(?: [a-z-]+)*) --help\n(.*?)^```$",
                        re.DOTALL | re.MULTILINE)


# One interpreter for every help text: each `runq ... --help` exits, which
# this catches, so that importing runq (and the dashboard's Starlette) is paid once.
HELPS = """
import contextlib, io, json, sys
from runq.cli import main
out = {}
for command in json.loads(sys.argv[1]):
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        main([*command, "--help"])
    out[" ".join(["runq", *command])] = text.getvalue()
print(json.dumps(out))
"""


def runq_help(*commands: tuple[str, ...]) -> dict[str, str]:
    """What `runq COMMAND --help` prints, 80 columns wide, for each command."""
    done = subprocess.run([sys.executable, "-c", HELPS, json.dumps(commands)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    helps: dict[str, str] = json.loads(done.stdout)
    return helps


def choices(help_text: str, metavar: str) -> set[str]:
    """The subcommands a help text lists under its positional METAVAR."""
    listed = help_text.split(f"\n  {metavar}\n", 1)[1]
    return set(re.findall(r"^    ([a-z-]+)\b", listed, re.MULTILINE))


def words(text: str) -> str:
    # Line breaks follow the terminal's width and Python's argparse: compare words.
    return " ".join(text.split())


@pytest.mark.once  # the command line's files alone: no server version changes them
def test_cli_reference_is_current() -> None:
    shown = {command: text for command, text in HELP_BLOCK.findall(CLI_PAGE.read_text())}
    top = runq_help((), ("schedule",))
    commands = [(), *((c,) for c in choices(top["runq"], "COMMAND")),
                *(("schedule", a) for a in choices(top["runq schedule"], "ACTION"))]
    current = runq_help(*commands)
    assert set(shown) == set(current), (
        f"docs/reference/cli.md shows the help of {sorted(shown)}, the command has "
        f"{sorted(current)}")
    stale = [command for command in sorted(current)
             if words(shown[command]) != words(current[command])]
    assert not stale, ("docs/reference/cli.md shows an old help of " + ", ".join(stale)
                       + ": paste what `COLUMNS=80 <command> --help` prints now")
