"""House rules that hold for every file in the repository.

No issue numbers: a tracker outside the repository is not where a reader can
look, and its numbers mean nothing to one who finds the code without it. A
file says what it covers, in its own words, not which ticket asked for it.
"""
import re

import pytest
from pgutil import ROOT, run

# A check of the repository's files alone: no server version changes it.
pytestmark = pytest.mark.once

# "issue N", "Issue #N", "issues N and M", "(#N)": a number a tracker gave.
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)


def repository_files() -> list[str]:
    """Tracked files, and new ones git does not ignore, as they are on disk."""
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard").stdout
    return [name for name in listed.splitlines() if (ROOT / name).is_file()]


def test_no_file_mentions_an_issue_number() -> None:
    found = []
    for name in repository_files():
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue  # not text
        for m in ISSUE_NUMBER.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{name}:{line}: {m.group()}")
    assert not found, "issue numbers (say what the file covers instead):\n" + "\n".join(found)


# Built from parts so that this file passes its own test.
@pytest.mark.parametrize("template", ["the schema (issue {n}): tables", "{I}ssue {n}, faults",
                                      "issue #{n}", "see issues {n} and {m}", "fixed in (#{n})"])
def test_an_issue_number_is_found(template: str) -> None:
    assert ISSUE_NUMBER.search(template.format(I="I", n=3, m=4))


@pytest.mark.parametrize("text", ["claim has issued it yet", "an issue the pool handles",
                                  "SELECT '&#39;'", "https://example.org/page#12"])
def test_words_that_are_no_issue_number_pass(text: str) -> None:
    assert not ISSUE_NUMBER.search(text)
