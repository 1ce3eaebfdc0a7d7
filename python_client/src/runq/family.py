"""A run's family as ``runq inspect`` and the dashboard show it: its parent
(runq.get_run) and its descendants, read level by level through
runq.children down to a depth and up to a number of runs, so that a parent
of ten thousand children costs a bounded number of calls. Only reads: which
children exist and how they fare is runq's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from runq.client import Client
from runq.errors import RunNotFound
from runq.types import ChildRun, Run

__all__ = ["Branch", "Descendants", "descendants", "parent_of", "rows"]

# How far down and how many runs a family is read by default.
DEPTH = 4
LIMIT = 200


@dataclass
class Descendants:
    """A run's children as far as they were read: ``shown`` in spawn order,
    and ``more`` of them not read (past the depth or the limit)."""

    shown: list[Branch] = field(default_factory=list)
    more: int = 0


@dataclass
class Branch:
    """A child, and its own children as far as they were read."""

    run: ChildRun
    children: Descendants = field(default_factory=Descendants)


def descendants(client: Client, run_id: int, depth: int = DEPTH,
                limit: int = LIMIT) -> Descendants:
    """The children of run_id, theirs, and so on down to ``depth`` levels
    (1: the children only), at most ``limit`` runs in all, read a level at a
    time (the runs nearest the top first). Each run shown costs one
    runq.children call. Raises RunNotFound for an unknown run_id."""
    top = Descendants()
    level: list[tuple[int, Descendants]] = [(run_id, top)]
    shown = 0
    for d in range(1, depth + 2):
        below: list[tuple[int, Descendants]] = []
        for parent, into in level:
            found = client.children(parent)
            room = 0 if d > depth else max(0, limit - shown)
            for child in found[:room]:
                branch = Branch(child)
                into.shown.append(branch)
                below.append((child.run_id, branch.children))
            into.more = len(found) - len(into.shown)
            shown += len(into.shown)
        level = below
        if not level:
            break
    return top


def rows(children: Descendants, depth: int = 1) -> Iterator[tuple[int, Branch | int]]:
    """The tree in pre-order, each with its depth (1: a child of the root):
    a Branch, or the number of children not read at that place."""
    for branch in children.shown:
        yield depth, branch
        yield from rows(branch.children, depth + 1)
    if children.more:
        yield depth, children.more


def parent_of(client: Client, run: Run) -> Run | None:
    """The run's parent, or None when it has none or it was purged (the run
    still names it in parent_run_id)."""
    if run.parent_run_id is None:
        return None
    try:
        return client.get_run(run.parent_run_id)
    except RunNotFound:
        return None
