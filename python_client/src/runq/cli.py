"""The ``runq`` command: an operator's view of the queue.

Every subcommand is one or a few calls of the runq SQL functions through
:class:`runq.Client`. Output is an aligned table, or JSON with ``--json``.
Exit status: 0 done, 1 runq refused (no such run, wrong state, ...) or the
database refused, 2 usage or connection error. Errors are one line on stderr.
Two subcommands run a service instead, with a parser of their own:
``runq worker`` a worker pool (runq.worker), ``runq dashboard`` the web
dashboard (runq.dashboard, an extra that may not be installed).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import FrameType
from typing import Any, TypeVar

import psycopg

from runq import family
from runq.client import Client, json_text
from runq.errors import RunqError
from runq.types import Schedule, UsageRow
from runq.worker import Slot, WorkerPool

__all__ = ["main", "worker"]

CLASS_NAMES = {0: "interactive", 10: "async", 20: "maintenance"}


class UsageError(Exception):
    """Bad invocation the parser could not see (exit 2)."""


# -- formatting ---------------------------------------------------------------

def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, timedelta):
        return _duration(value)
    if isinstance(value, Decimal):
        return format(value, "f")  # as runq summed it, digit for digit
    if isinstance(value, dict | list):
        return json_text(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h{minutes:02d}m"


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table; numbers right-aligned (a column of
    numbers may have empty cells, shown as -)."""
    cells = [[_cell(v) for v in row] for row in rows]

    def number(value: Any) -> bool:
        return isinstance(value, int | float | Decimal) and not isinstance(value, bool)

    numeric = [
        any(number(row[i]) for row in rows)
        and all(row[i] is None or number(row[i]) for row in rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _print_json(value: Any) -> None:
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.asdict(v)
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    # Decimals (usage, budgets) as the exact numbers they are
    print(json_text(plain(value), default=_json_default, indent=2))


def _class(priority: int) -> str:
    name = CLASS_NAMES.get(priority)
    return f"{priority} {name}" if name else str(priority)


# -- commands -------------------------------------------------------------------

def cmd_status(client: Client, args: argparse.Namespace) -> int:
    stats = client.queue_stats()
    limits = client.limits()
    pauses = client.pauses()
    schedules = client.schedules()
    if args.json:
        _print_json({"queue_stats": stats, "limits": limits, "pauses": pauses,
                     "schedules": schedules})
        return 0
    if not stats:
        print("no queued, running, waiting or failed runs")
    else:
        print(table(
            ["class", "ready", "scheduled", "running", "waiting", "on children", "failed",
             "oldest ready"],
            [[_class(s.priority), s.ready, s.scheduled, s.running, s.waiting_for_user,
              s.waiting_for_children, s.failed, s.oldest_ready_age] for s in stats]))
    if limits:
        print()
        print(table(["limit", "key", "max running", "running"],
                    [[x.scope, x.key, x.max_running, x.running] for x in limits]))
    if pauses:
        print()
        print(table(["paused", "key", "reason", "since"],
                    [[p.scope, _paused_key(p.scope, p.key), p.reason, p.paused_at]
                     for p in pauses]))
    if schedules:
        print()
        _schedule_table(schedules)
    return 0


def _schedule_table(schedules: Sequence[Schedule]) -> None:
    print(table(["schedule", "tenant", "kind", "timing", "next slot", "last slot", "last run",
                 "paused"],
                [[s.name, s.tenant_id, s.kind, _timing(s), s.next_slot, s.last_slot,
                  s.last_run_id, s.paused] for s in schedules]))


def _timing(schedule: Schedule) -> str:
    """cron '0 3 * * *' in Europe/Paris, or every 1h00m00s."""
    if schedule.cron is not None:
        return f"cron {schedule.cron}" + ("" if schedule.timezone == "UTC"
                                          else f" ({schedule.timezone})")
    return f"every {_cell(schedule.every)}"


def _paused_key(scope: str, key: str) -> str:
    """A paused class with its name (10 async), any other key as it is."""
    return _class(int(key)) if scope == "class" and key.isascii() and key.isdigit() else key


def cmd_inspect(client: Client, args: argparse.Namespace) -> int:
    run = client.get_run(args.run)
    events = client.run_events(args.run)
    calls = client.tool_calls(args.run)
    parent = family.parent_of(client, run)
    children = family.descendants(client, args.run, args.depth, INSPECT_LIMIT)
    if args.json:
        _print_json({"run": run, "events": events, "tool_calls": calls, "parent": parent,
                     "children": _nested(children.shown), "more_children": children.more})
        return 0
    fields = dataclasses.asdict(run)
    fields["priority"] = _class(run.priority)
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        print(f"{key.ljust(width)}  {_cell(value)}")
    print()
    if run.parent_run_id is not None:
        print(f"parent  run {run.parent_run_id}  " + (
            "(purged)" if parent is None else f"{parent.kind}  {parent.status}  "
            f"usage {_cell(parent.usage)}"))
        print()
    if children.shown or children.more:
        print(table(["child", "run", "kind", "status", "usage"], [
            [_branch(depth, b.run.key), b.run.run_id, b.run.kind, b.run.status, b.run.usage]
            if isinstance(b, family.Branch) else
            [_branch(depth, f"… {b} more" + (" (deeper than --depth)" if depth > args.depth
                                             else "")), None, None, None, None]
            for depth, b in family.rows(children)]))
        print()
    print(table(["event", "time", "epoch", "type", "payload"],
                [[e.event_id, e.created_at, e.epoch, e.type, _clip(_cell(e.payload), 80)]
                 for e in events]))
    if calls:
        print()
        print(table(["call", "tool", "idempotency", "status", "epoch", "started", "finished"],
                    [[c.call_id, c.tool, c.idempotency, c.status, c.epoch, c.started_at,
                      c.finished_at] for c in calls]))
    return 0


# The most descendants `runq inspect` reads (family.descendants).
INSPECT_LIMIT = 1000


def _branch(depth: int, text: str) -> str:
    """A tree's label: a child of the run as it is, deeper ones indented."""
    return text if depth == 1 else "  " * (depth - 2) + "└ " + text


def _nested(branches: Sequence[family.Branch]) -> list[dict[str, Any]]:
    """The tree as JSON: each child's fields, its children, how many more."""
    return [{**dataclasses.asdict(b.run), "children": _nested(b.children.shown),
             "more_children": b.children.more} for b in branches]


# --by: the columns a usage row is folded by
USAGE_BY = {None: ("tenant_id", "kind"), "tenant": ("tenant_id",), "kind": ("kind",)}
USAGE_HEADERS = {"tenant_id": "tenant", "kind": "kind"}


def _fold(rows: Sequence[UsageRow], by: Sequence[str]) -> list[dict[str, Any]]:
    """The report's rows summed per value of the columns ``by`` (a run has
    one tenant and one kind, so the runs add up too), in the order of those
    values."""
    folded: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = tuple(getattr(row, name) for name in by)
        into = folded.setdefault(key, {**dict(zip(by, key, strict=True)), "runs": 0,
                                       "usage": {}})
        into["runs"] += row.runs
        for name, amount in row.usage.items():
            into["usage"][name] = into["usage"].get(name, 0) + amount
    return [folded[key] for key in sorted(folded)]


def cmd_usage(client: Client, args: argparse.Namespace) -> int:
    by = USAGE_BY[args.by]
    rows = _fold(client.usage_report(args.since, args.until), by)
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        window = (f"since {_cell(args.since)}" if args.until is None
                  else f"from {_cell(args.since)} until {_cell(args.until)}")
        print(f"no usage recorded {window}")
        return 0
    names = sorted({name for row in rows for name in row["usage"]})
    print(table([*(USAGE_HEADERS[b] for b in by), "runs", *names],
                [[*(row[b] for b in by), row["runs"], *(row["usage"].get(n) for n in names)]
                 for row in rows]))
    return 0


def _show(args: argparse.Namespace, rows: Sequence[Any], empty: str, headers: list[str],
          cells: Callable[[Any], list[Any]]) -> None:
    """The rows as JSON with --json; else a table of them, or `empty` when there are none."""
    if args.json:
        _print_json(rows)
    elif not rows:
        print(empty)
    else:
        print(table(headers, [cells(row) for row in rows]))


def cmd_failed(client: Client, args: argparse.Namespace) -> int:
    _show(args, client.dead_letter(args.limit), "the dead letter is empty",
          ["run", "tenant", "session", "kind", "class", "attempts", "finished", "code", "message"],
          lambda r: [r.run_id, r.tenant_id, r.session_id, r.kind, _class(r.priority), r.attempts,
                     r.finished_at, (r.failure or {}).get("code"),
                     _clip(str((r.failure or {}).get("message", "")))])
    return 0


def cmd_redrive(client: Client, args: argparse.Namespace) -> int:
    done = client.redrive(args.run, args.reason)
    if args.json:
        _print_json({"run_id": args.run, "redriven": done})
    else:
        print(f"run {args.run} {'redriven: queued again' if done else 'was not redriven'}")
    return 0 if done else 1


def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    outcome = client.cancel(args.run, args.reason)
    if args.json:
        _print_json({"run_id": args.run, "outcome": outcome})
    else:
        print(f"run {args.run}: {outcome}")
    return 0


# runq wait's and runq tail's exit status by the run's status; 124 (as
# timeout(1)) when it is still going at --timeout.
_ENDED = {"succeeded": 0, "failed": 1, "cancelled": 1, "waiting_for_user": 2}


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    try:
        run = client.wait(args.run, timeout=args.timeout)
    except TimeoutError:
        print(f"run {args.run}: still going after {args.timeout:g} s", file=sys.stderr)
        return 124
    if args.json:
        _print_json(run)
    else:
        print(f"run {args.run}: {run.status}")
    return _ENDED[run.status]


def cmd_tail(client: Client, args: argparse.Namespace) -> int:
    for chunk in client.stream(args.run, after_seq=args.after):
        if args.json:  # a line each, for a reader that reads as they come
            print(json_text({"seq": chunk.seq, "epoch": chunk.epoch, "chunk": chunk.chunk},
                            default=_json_default), flush=True)
        else:
            text = chunk.chunk if isinstance(chunk.chunk, str) else json_text(chunk.chunk)
            print(f"{chunk.seq}\t{chunk.epoch}\t{text}", flush=True)
    status = client.get_run(args.run).status
    print(f"run {args.run}: {status}", file=sys.stderr)
    return _ENDED.get(status, 1)


def cmd_orphans(client: Client, args: argparse.Namespace) -> int:
    stale_after = None if args.stale_after is None else timedelta(seconds=args.stale_after)
    _show(args, client.orphan_report(stale_after), "no running runs",
          ["owner", "stale", "did work", "runs", "oldest heartbeat"],
          lambda g: [g.lease_owner, g.stale, g.did_work, g.runs, g.oldest_heartbeat_at])
    return 0


def cmd_sweep(client: Client, args: argparse.Namespace) -> int:
    if args.every is None:
        _show(args, client.sweep(args.max_runs), "nothing to sweep", ["run", "action"],
              lambda a: [a.run_id, a.action])
        return 0

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.is_set():
            for a in client.sweep(args.max_runs):
                if args.json:
                    print(json.dumps({"run_id": a.run_id, "action": a.action}), flush=True)
                else:
                    now = datetime.now().astimezone().isoformat(sep=" ", timespec="seconds")
                    print(f"{now}  run {a.run_id} {a.action}", flush=True)
            stop.wait(args.every)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def cmd_purge(client: Client, args: argparse.Namespace) -> int:
    # Batches until one comes back short, each its own transaction, so no
    # call holds its row locks or its WAL for long.
    older_than = timedelta(days=args.older_than_days)
    total = 0
    while True:
        purged = client.purge(older_than, args.batch, args.include_failed)
        total += purged
        if purged < args.batch:
            break
    if args.json:
        _print_json({"purged": total})
    else:
        print(f"purged {total} run{'' if total == 1 else 's'} finished more than "
              f"{args.older_than_days:g} days ago")
    return 0


def cmd_schedule(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        schedules = client.schedules()
        if args.json:
            _print_json(schedules)
        elif not schedules:
            print("no schedules")
        else:
            _schedule_table(schedules)
        return 0
    if args.action == "drop":
        done = client.drop_schedule(args.name)
        if args.json:
            _print_json({"name": args.name, "dropped": done})
        else:
            print(f"schedule {args.name} {'dropped' if done else 'does not exist'}")
        return 0
    created = client.create_schedule(
        args.name, args.tenant, args.kind, cron=args.cron, every=args.every,
        payload=args.payload, priority=args.priority, timezone=args.timezone,
        max_attempts=args.max_attempts, recovery_policy=args.recovery_policy,
        queue_ttl=args.queue_ttl, timeout=args.timeout)
    # None when a drop came in between
    schedule = next((s for s in client.schedules() if s.name == args.name), None)
    if args.json:
        _print_json({"created": created, "schedule": schedule})
    elif schedule is None:
        print(f"schedule {args.name} {'created' if created else 'replaced'}")
    else:
        print(f"schedule {args.name} {'created' if created else 'replaced'}: "
              f"{_timing(schedule)}, next slot {_cell(schedule.next_slot)}")
    return 0


DEFAULT_KEY = "-"  # `runq limit tenant - 2`: the default row, for every key without its own


def cmd_limit(client: Client, args: argparse.Namespace) -> int:
    key = None if args.key == DEFAULT_KEY else args.key
    client.set_limit(args.scope, key, args.max)
    if args.json:
        _print_json({"scope": args.scope, "key": key, "max_running": args.max})
        return 0
    if key is None:
        what, removed = f"every {args.scope} without a limit of its own", "no limit"
    else:
        what, removed = f"{args.scope} {key}", "no limit of its own"
    print(f"{what}: {removed if args.max is None else f'at most {args.max} running'}")
    return 0


def cmd_pause(client: Client, args: argparse.Namespace) -> int:
    done = client.pause(args.scope, args.key, args.reason)
    if args.json:
        _print_json({"scope": args.scope, "key": args.key, "paused": done})
    else:
        print(f"{args.scope} {args.key} {'paused' if done else 'was paused already'}")
    return 0


def cmd_resume(client: Client, args: argparse.Namespace) -> int:
    done = client.resume(args.scope, args.key)
    if args.json:
        _print_json({"scope": args.scope, "key": args.key, "resumed": done})
    else:
        print(f"{args.scope} {args.key} {'resumed' if done else 'was not paused'}")
    return 0


def _delegate(module_name: str, what: str) -> Callable[[argparse.Namespace, list[str]], int]:
    """A subcommand implemented by another module of the package, which may
    not be installed: runs ``<module>.main(argv)``."""

    def run(args: argparse.Namespace, extra: list[str]) -> int:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name in (module_name, "runq"):
                raise UsageError(f"{what} ({module_name}) is not part of this installation "
                                 "of runq") from None
            raise UsageError(f"{module_name} needs a module that is missing: {error.name}")\
                from None
        entry = getattr(module, "main", None)
        if not callable(entry):
            raise UsageError(f"{module_name} has no main(argv) to run")
        return _forward(entry, args, extra)

    return run


def _forward(entry: Callable[[list[str]], Any], args: argparse.Namespace,
             extra: list[str]) -> int:
    """A subcommand with a parser of its own: its arguments, after the
    database runq's own parser read."""
    argv = list(extra)
    if args.database_url:
        argv = ["--database-url", args.database_url, *argv]
    result = entry(argv)
    return result if isinstance(result, int) else 0


# -- entry point --------------------------------------------------------------

N = TypeVar("N", int, float)


def _argument(convert: Callable[[str], N], kind: str, ok: Callable[[N], bool],
              rule: str) -> Callable[[str], N]:
    """An argparse type: a number of the given kind that must satisfy ok."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    return parse


def _max_running(text: str) -> int | None:
    """An argparse type: a whole number (runq judges its range), or none."""
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number or none: {text!r}") from None


_AGO = re.compile(r"(\d+(?:\.\d*)?)\s*(s|m|h|d|w)")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _time(text: str) -> datetime:
    """An argparse type: an ISO 8601 time (2026-12-01, 2026-12-01T08:00:00Z;
    without an offset, local time), or a span ago by this machine's clock
    (90s, 30m, 24h, 7d, 2w)."""
    ago = _AGO.fullmatch(text.strip())
    if ago:
        span = timedelta(**{_UNITS[ago.group(2)]: float(ago.group(1))})
        return datetime.now(timezone.utc) - span
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time (ISO 8601, or a span ago such as 24h or 7d): {text!r}") from None
    return value if value.tzinfo is not None else value.astimezone()


def _span(text: str) -> timedelta:
    """An argparse type: a positive span (90s, 30m, 1h, 1d, 2w)."""
    span = _AGO.fullmatch(text.strip())
    if not span or float(span.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"not a span such as 90s, 30m, 1h, 1d or 2w: {text!r}")
    return timedelta(**{_UNITS[span.group(2)]: float(span.group(1))})


def _object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {text!r}")
    return value


_positive_seconds = _argument(float, "a number", lambda v: v > 0, "more than 0")
_positive_int = _argument(int, "a whole number", lambda v: v >= 1, "1 or more")
_non_negative_days = _argument(float, "a number", lambda v: 0 <= v < 365_000,
                               "0 or more (and under 1000 years)")

_non_negative_seconds = _argument(float, "a number", lambda v: v >= 0, "0 or more")
_non_negative_int = _argument(int, "a whole number", lambda v: v >= 0, "0 or more")


# -- runq worker ----------------------------------------------------------------


def _slot(text: str) -> Slot:
    """``0,10:4`` -> Slot((0, 10), 4)."""
    try:
        classes, _, count = text.partition(":")
        return Slot(tuple(int(c) for c in classes.split(",")), int(count or 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a slot is CLASSES[:COUNT], like 0,10:4; got {text!r}") from None


def worker(argv: Sequence[str] | None = None) -> int:
    """``runq worker MODULE``: a pool running the handlers MODULE.HANDLERS
    (a mapping of run kind to handler, ``def`` or ``async def``) until
    SIGTERM or SIGINT."""
    ap = argparse.ArgumentParser(prog="runq worker", description=worker.__doc__)
    ap.add_argument("module", help="module with HANDLERS = {kind: handler}")
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"))
    ap.add_argument("--slot", dest="slots", type=_slot, action="append",
                    help="CLASSES[:COUNT], repeatable (default: 0:1 and 0,10,20:2)")
    ap.add_argument("--lease", type=float, default=30.0, help="lease in seconds")
    ap.add_argument("--poll", type=float, default=1.0, help="poll interval in seconds")
    ap.add_argument("--sweep-every", type=_non_negative_seconds, default=5.0,
                    help="0: do not sweep")
    ap.add_argument("--tick-every", type=_non_negative_seconds, default=5.0,
                    help="seconds between ticks of the schedules; 0: do not tick")
    ap.add_argument("--grace", type=float, default=10.0, help="seconds to finish on shutdown")
    ap.add_argument("--connections", type=int, default=4,
                    help="connections the runs share (the pool holds 2 more)")
    ap.add_argument("--worker-id")
    opts = ap.parse_args(argv)
    if not opts.database_url:
        print("runq worker: no database: pass --database-url or set RUNQ_DATABASE_URL",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sys.path.insert(0, os.getcwd())
    handlers = importlib.import_module(opts.module).HANDLERS
    pool = WorkerPool(opts.database_url, handlers,
                      opts.slots or [Slot((0,), 1), Slot((0, 10, 20), 2)],
                      lease=timedelta(seconds=opts.lease), poll_interval=opts.poll,
                      sweep_interval=opts.sweep_every or None,
                      tick_interval=opts.tick_every or None, grace=opts.grace,
                      max_connections=opts.connections,
                      **({"worker_id": opts.worker_id} if opts.worker_id else {}))
    pool.run()
    return 0


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--database-url", default=argparse.SUPPRESS, metavar="URL",
                        help="the database (default: $RUNQ_DATABASE_URL)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON instead of a table")

    parser = argparse.ArgumentParser(
        prog="runq", parents=[common],
        description="Operate a runq queue: the state of the queue, runs, the dead letter, "
                    "limits and pauses, usage.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help, description=help)

    command("status", "queue statistics by priority class, the limits, the pauses and the "
                      "schedules")
    p = command("inspect", "a run (with its usage, budget and deadline), its parent and its"
                           " children's tree, and its event timeline")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--depth", type=_positive_int, default=family.DEPTH, metavar="LEVELS",
                   help=f"levels of children shown (default {family.DEPTH})")
    p = command("usage", "the usage recorded in a window, per tenant and kind, from the ledger")
    p.add_argument("--since", type=_time, required=True, metavar="TIME",
                   help="from this time on (ISO 8601, or a span ago: 24h, 7d)")
    p.add_argument("--until", type=_time, metavar="TIME", help="before this time (default: now)")
    p.add_argument("--by", choices=["tenant", "kind"],
                   help="sum per tenant or per kind only (default: per tenant and kind)")
    p = command("failed", "the dead letter (failed runs), most recently failed first")
    p.add_argument("--limit", type=int, default=None, help="at most this many runs (100)")
    p = command("redrive", "put a failed run back in the queue")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--reason", help="recorded in the run.redriven event")
    p = command("cancel", "cancel a run (a running run stops at its next heartbeat)")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--reason", help="recorded with the cancellation")
    p = command("wait", "wait until a run is terminal or waits for its user; exit 0 succeeded,"
                        " 1 failed or cancelled, 2 waiting for its user, 124 on timeout")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS",
                   help="give up after this long (default: wait as long as it takes)")
    p = command("tail", "print a run's output as it is written (seq, epoch, chunk; --json: a"
                        " JSON object a line), until the run ends; exit as runq wait")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--after", type=_non_negative_int, default=0, metavar="SEQ",
                   help="start after this chunk (default: from the first)")
    p = command("orphans", "running runs by lease owner, staleness and work done")
    p.add_argument("--stale-after", type=_positive_seconds, metavar="SECONDS",
                   help="heartbeat age that counts as stale (default: the server setting)")
    p = command("sweep", "expire leases and queue TTLs once, or every SECONDS")
    p.add_argument("--every", type=_positive_seconds, metavar="SECONDS",
                   help="keep sweeping at this interval until SIGINT/SIGTERM")
    p.add_argument("--max-runs", type=int, default=None, help="runs per sweep (1000)")
    p = command("purge", "delete old finished runs with their events (the dead letter stays "
                         "unless --include-failed)")
    p.add_argument("--older-than-days", type=_non_negative_days, required=True, metavar="DAYS",
                   help="delete runs that finished more than DAYS ago")
    p.add_argument("--include-failed", action="store_true",
                   help="also delete failed runs (the dead letter)")
    p.add_argument("--batch", type=_positive_int, default=1000,
                   help="runs per transaction (1000)")
    p = command("limit", "limit the running runs of a tenant or a kind (every one without a "
                         "limit of its own: KEY -)")
    p.add_argument("scope", metavar="SCOPE", help="tenant or kind")
    p.add_argument("key", metavar="KEY",
                   help=f"the tenant_id or kind; {DEFAULT_KEY} for the default row")
    p.add_argument("max", type=_max_running, metavar="MAX",
                   help="at most this many running runs (1 or more); none removes the row")
    p = command("pause", "stop claims of a class's, kind's or tenant's queued runs (running "
                         "runs go on), or a schedule's ticks")
    p.add_argument("scope", metavar="SCOPE", help="class, kind, tenant or schedule")
    p.add_argument("key", metavar="KEY", help="the class (10), kind, tenant_id or schedule")
    p.add_argument("--reason", help="shown in runq status")
    p = command("resume", "undo a pause: its queued runs are claimable at once")
    p.add_argument("scope", metavar="SCOPE", help="class, kind, tenant or schedule")
    p.add_argument("key", metavar="KEY", help="the class (10), kind, tenant_id or schedule")
    p = command("schedule", "add, list or drop the schedules that runq.tick turns into runs")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("add", parents=[common], help="create a schedule, or replace the "
                           "one of that name", description="Create a schedule, or replace the "
                           "one of that name: exactly one of --cron and --every.")
    a.add_argument("name", metavar="NAME")
    a.add_argument("tenant", metavar="TENANT", help="the tenant_id of its runs")
    a.add_argument("kind", metavar="KIND", help="the kind of its runs")
    timing = a.add_mutually_exclusive_group(required=True)
    timing.add_argument("--cron", metavar="EXPR",
                        help="five-field cron, such as '0 3 * * *', read in --timezone")
    timing.add_argument("--every", type=_span, metavar="SPAN",
                        help="a run every SPAN (90s, 30m, 1h, 1d) from now on")
    a.add_argument("--timezone", metavar="TZ", help="the cron's time zone (UTC)")
    a.add_argument("--payload", type=_object, metavar="JSON",
                   help="the runs' payload, a JSON object ({}); each run gets \"slot\" in it")
    a.add_argument("--priority", type=int, help="the runs' priority class (10)")
    a.add_argument("--max-attempts", type=int, help="the runs' max_attempts (3)")
    a.add_argument("--recovery-policy", metavar="POLICY", help="resume, fail or zero_work")
    a.add_argument("--queue-ttl", type=_span, metavar="SPAN",
                   help="a run not claimed within SPAN expires")
    a.add_argument("--timeout", type=_span, metavar="SPAN",
                   help="a run not terminal SPAN after the tick made it fails (its deadline)")
    actions.add_parser("list", parents=[common], help="the schedules, their next and last "
                       "slots, whether paused")
    d = actions.add_parser("drop", parents=[common], help="drop a schedule (its runs stay)")
    d.add_argument("name", metavar="NAME")
    # no -h of its own: `runq worker -h` is the module's help
    sub.add_parser("worker", parents=[common], add_help=False,
                   help="run a worker pool (runq.worker; see runq worker -h)")
    sub.add_parser("dashboard", parents=[common], add_help=False,
                   help="serve the web dashboard and /metrics (runq.dashboard, the extra "
                        "runq[dashboard]; see runq dashboard -h)")
    return parser


_COMMANDS: dict[str, Callable[[Client, argparse.Namespace], int]] = {
    "status": cmd_status,
    "inspect": cmd_inspect,
    "usage": cmd_usage,
    "failed": cmd_failed,
    "redrive": cmd_redrive,
    "cancel": cmd_cancel,
    "wait": cmd_wait,
    "tail": cmd_tail,
    "orphans": cmd_orphans,
    "sweep": cmd_sweep,
    "purge": cmd_purge,
    "limit": cmd_limit,
    "pause": cmd_pause,
    "resume": cmd_resume,
    "schedule": cmd_schedule,
}

_DELEGATED = {
    "worker": lambda args, extra: _forward(worker, args, extra),
    "dashboard": _delegate("runq.dashboard", "the dashboard"),
}


# undefined_table, undefined_function, invalid_schema_name
_NOT_DEPLOYED = {"42P01", "42883", "3F000"}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _describe(error: RunqError) -> str:
    """The server's message, then its DETAIL and HINT sentences, on one line."""
    extra = " ".join(p for p in (error.detail, error.hint) if p)
    return _one_line(f"{error.message}. {extra}" if extra else error.message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the runq command line; returns the exit status."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.command not in _DELEGATED and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.json = getattr(args, "json", False)
    args.database_url = getattr(args, "database_url", None) or os.environ.get(
        "RUNQ_DATABASE_URL")
    prog = " ".join(["runq", args.command, *([args.action] if args.command == "schedule" else [])])
    try:
        if args.command in _DELEGATED:
            return _DELEGATED[args.command](args, extra)
        if not args.database_url:
            raise UsageError("no database: pass --database-url or set RUNQ_DATABASE_URL")
        try:
            with Client.connect(args.database_url, application_name="runq-cli") as client:
                return _COMMANDS[args.command](client, args)
        except psycopg.OperationalError as error:
            raise UsageError(_one_line(str(error))) from None
    except UsageError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    except RunqError as error:
        print(f"{prog}: {_describe(error)}", file=sys.stderr)
        return 1
    except psycopg.Error as error:
        message = error.diag.message_primary or str(error)
        if error.sqlstate in _NOT_DEPLOYED:
            message += ": is runq (up to date) deployed in this database?"
        code = f" ({error.sqlstate})" if error.sqlstate else ""
        print(f"{prog}: {_one_line(message)}{code}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`runq failed | head`): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
