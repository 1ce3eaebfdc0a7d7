"""The runq dashboard: server-rendered pages over the read-only surface.

Every page reads through a pool whose connections ``SET ROLE runq_observer``,
so a page can show nothing and change nothing beyond what that role may.
With ``allow_actions`` (and only then) the app also has POST routes for
cancel, redrive, pause and resume; they run through a second pool under
``runq_admin``, and each checks the app's CSRF token and the request's
Origin. Without it the app has no route that writes. Requests must name one
of the app's hosts (127.0.0.1 and localhost by default), so a page of
another site that rebinds its name to this address gets a 400, not data.

``SET ROLE`` is session state: connect directly, or through PgBouncer in
session mode, never in transaction mode (the role would stay with a server
connection, not with the dashboard).
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
import psycopg
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runq import family
from runq.client import Client, json_text
from runq.dashboard.metrics import CONTENT_TYPE_LATEST, metrics_text
from runq.errors import InvalidArgument, RunNotFound, RunqError
from runq.types import Event, Run, ThroughputRow

__all__ = ["create_app"]

HERE = Path(__file__).parent
PAGE_SIZE = 50
# A run page shows this much of the run's output (the first chunks; runq tail
# follows all of it).
OUTPUT_CHUNKS = 500
MAX_ID = 2**63 - 1  # a bigint
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
TERMINAL = ("succeeded", "failed", "cancelled")
STATUSES = ("queued", "running", "waiting_for_user", "waiting_for_children", "succeeded",
            "failed", "cancelled")
# A run page shows its children's tree this many levels down, at most this
# many runs of it (each costs a runq.children call, on every refresh).
FAMILY_DEPTH = 3
FAMILY_LIMIT = 100
# Events an operator looks for first on a stuck run: a stale worker stopped,
# a lease that expired.
ALERT_EVENTS = frozenset({"run.fenced", "run.requeued"})
SECURITY_HEADERS = {
    # Scripts, styles and forms from this app only; no framing.
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; object-src 'none'; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def role_pool(database_url: str, role: str, name: str) -> ConnectionPool[Any]:
    """A pool of autocommit connections that SET ROLE role (opened by
    ``with`` or open())."""
    def as_role(conn: psycopg.Connection[Any]) -> None:
        # role is one of two constants above, never user input.
        conn.execute(psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role)))
        # Counting a large backlog crosses the JIT thresholds, and compiling
        # costs a page or a scrape more than the counting (17 ms of 40 ms for
        # queue_stats over 120,000 queued, held and failed runs).
        conn.execute("SET jit = off")

    return ConnectionPool(database_url, min_size=1, max_size=4, name=name, open=False,
                          configure=as_role,
                          kwargs={"autocommit": True, "application_name": name})


def _run_id(text: str | None) -> int | None:
    """A run id from the query string, or None; ValueError beyond a bigint."""
    if not text:
        return None
    value = int(text)
    if not 0 < value <= MAX_ID:
        raise ValueError(text)
    return value


# -- formatting ---------------------------------------------------------------

def _when(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(value: timedelta | None) -> str:
    if value is None:
        return ""
    seconds = int(value.total_seconds())
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0s"


def _json(value: Any) -> str:
    return json_text(value, indent=2, sort_keys=True)


def _amount(value: Decimal | None) -> str:
    """An exact amount as digits (0.0000004, never 4E-7)."""
    return "" if value is None else format(value, "f")


@dataclass(frozen=True)
class Chart:
    """Started and finished runs per minute as SVG coordinates."""

    width: int
    height: int
    started: str
    finished: str
    peak: int
    minutes: int


def _chart(rows: Sequence[ThroughputRow], since: datetime, minutes: int = 60) -> Chart:
    width, height = 600, 120
    by_minute = {int((r.minute - since).total_seconds() // 60): r for r in rows}
    peak = max([1, *(max(r.started, r.finished) for r in rows)])

    def line(pick: Callable[[ThroughputRow], int]) -> str:
        points = []
        for m in range(minutes):
            row = by_minute.get(m)
            value = pick(row) if row else 0
            x = round(m * width / (minutes - 1), 1)
            y = round(height - value * height / peak, 1)
            points.append(f"{x},{y}")
        return " ".join(points)

    return Chart(width, height, line(lambda r: r.started), line(lambda r: r.finished), peak,
                 minutes)


def _usage_rows(run: Run) -> list[tuple[str, Decimal | None, Decimal | None]]:
    budget = run.budget or {}
    keys = sorted(set(run.usage) | set(budget))
    return [(k, run.usage.get(k), budget.get(k)) for k in keys]


# -- the app --------------------------------------------------------------------

def create_app(database_url: str, *, allow_actions: bool = False,
               refresh_seconds: float = 5.0,
               hosts: Sequence[str] = LOOPBACK_HOSTS) -> Starlette:
    """The dashboard for the runq database at ``database_url``, whose role
    must be a member of runq_observer (and of runq_admin with
    ``allow_actions``), answering requests for ``hosts`` only."""
    read_pool = role_pool(database_url, "runq_observer", "runq-dashboard")
    act_pool = role_pool(database_url, "runq_admin", "runq-dashboard-actions") \
        if allow_actions else None
    reader = Client(read_pool)
    actor = Client(act_pool) if act_pool is not None else None
    templates = Jinja2Templates(env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True))
    templates.env.filters.update(when=_when, span=_span, json=_json, amount=_amount)
    templates.env.globals.update(allow_actions=allow_actions, refresh_seconds=refresh_seconds,
                                 statuses=STATUSES, terminal=TERMINAL, alert_events=ALERT_EVENTS)

    # One token for the app's life, in every form it serves and nowhere
    # else: a page of another origin can neither read it (no CORS, and the
    # host check) nor set it, as it could a cookie.
    token = secrets.token_urlsafe(32)

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(request, name, {"csrf": token, **context},
                                          status_code=status_code)

    def refused(request: Request, error: RunqError, status_code: int) -> Response:
        return page(request, "error.html", status_code=status_code, error=error.message)

    def overview(request: Request) -> Response:
        since = datetime.now(timezone.utc).replace(second=0, microsecond=0) \
            - timedelta(minutes=59)
        # The database's minutes past this host's clock, if it is behind,
        # are left out of the chart and of its totals alike.
        throughput = [r for r in reader.throughput(since)
                      if r.minute < since + timedelta(minutes=60)]
        return page(request, "overview.html", stats=reader.queue_stats(), since=since,
                    chart=_chart(throughput, since),
                    started=sum(r.started for r in throughput),
                    finished=sum(r.finished for r in throughput),
                    orphans=reader.orphan_report(), limits=reader.limits(),
                    pauses=reader.pauses(), recovery=reader.recovery_totals())

    def runs(request: Request) -> Response:
        q = request.query_params
        filters = {k: q.get(k) or None for k in ("status", "tenant_id", "kind")}
        try:
            before = _run_id(q.get("before"))
            # One more than a page: whether there is an older page at all.
            listed = reader.list_runs(**filters, before_run_id=before, max_runs=PAGE_SIZE + 1)
        except ValueError:
            return page(request, "error.html", status_code=400,
                        error=f"before must be a run id, got {q.get('before')!r}")
        except InvalidArgument as error:
            return refused(request, error, 400)
        except psycopg.DataError as error:  # a NUL in a filter, say
            return page(request, "error.html", status_code=400,
                        error=error.diag.message_primary or str(error))
        more = None
        if len(listed) > PAGE_SIZE:
            listed = listed[:PAGE_SIZE]
            more = "?" + urlencode({**{k: v for k, v in filters.items() if v},
                                    "before": listed[-1].run_id})
        return page(request, "runs.html", runs=listed, filters=filters, more=more,
                    title="Runs")

    def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if run_id > MAX_ID:
            return page(request, "error.html", status_code=404, error=f"no run {run_id}")
        try:
            found = reader.get_run(run_id)
        except RunNotFound as error:
            return refused(request, error, 404)
        events = reader.run_events(run_id)
        output = reader.read_output(run_id, max_chunks=OUTPUT_CHUNKS + 1)
        children = family.descendants(reader, run_id, FAMILY_DEPTH, FAMILY_LIMIT)
        return page(request, "run.html", run=found, events=events,
                    parent=family.parent_of(reader, found), children=list(family.rows(children)),
                    family_depth=FAMILY_DEPTH,
                    output=output[:OUTPUT_CHUNKS], output_clipped=len(output) > OUTPUT_CHUNKS,
                    tool_calls=reader.tool_calls(run_id), usage=_usage_rows(found),
                    checkpoints=_of(events, "run.checkpointed"),
                    inputs=_of(events, "run.input_delivered"),
                    epochs=sorted({e.epoch for e in events if e.type == "run.fenced"}))

    def dead_letter(request: Request) -> Response:
        return page(request, "dead_letter.html", runs=reader.dead_letter(PAGE_SIZE),
                    total=sum(s.failed for s in reader.queue_stats()))

    def waiting(request: Request) -> Response:
        q = request.query_params
        try:
            before = _run_id(q.get("before"))
        except ValueError:
            return page(request, "error.html", status_code=400,
                        error=f"before must be a run id, got {q.get('before')!r}")
        listed = reader.list_runs("waiting_for_user", before_run_id=before,
                                  max_runs=PAGE_SIZE + 1)
        more = None
        if len(listed) > PAGE_SIZE:
            listed = listed[:PAGE_SIZE]
            more = f"?before={listed[-1].run_id}"
        return page(request, "waiting.html", runs=listed, more=more)

    def schedules(request: Request) -> Response:
        return page(request, "schedules.html", schedules=reader.schedules())

    def metrics(request: Request) -> Response:
        return Response(metrics_text(reader), media_type=CONTENT_TYPE_LATEST)

    routes: list[BaseRoute] = [
        Route("/", overview),
        Route("/runs", runs),
        Route("/runs/{run_id:int}", run),
        Route("/dead-letter", dead_letter),
        Route("/waiting", waiting),
        Route("/schedules", schedules),
        Route("/metrics", metrics),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    if actor is not None:
        routes += _action_routes(actor, token, hosts)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Wait for a first connection: a role that may not SET ROLE fails
        # the start, not every request 30 s later.
        read_pool.open(wait=True, timeout=10)
        if act_pool is not None:
            act_pool.open(wait=True, timeout=10)
        try:
            yield
        finally:
            read_pool.close()
            if act_pool is not None:
                act_pool.close()

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[
        Middleware(TrustedHostMiddleware,
                   allowed_hosts=[h.strip("[]") if h.startswith("[") else h for h in hosts]),
        Middleware(_SecurityHeaders)])
    app.state.read_pool, app.state.action_pool = read_pool, act_pool
    return app


class _SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP response, static files included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        await self.app(scope, receive, with_headers)


def _of(events: Sequence[Event], kind: str) -> list[Event]:
    return [e for e in events if e.type == kind]


# -- actions (with allow_actions only) -----------------------------------------

def _same_origin(request: Request, hosts: Sequence[str]) -> bool:
    """A browser sends Origin with every POST; it must be this app's: the
    request's own host (which the host check has vetted) and one of hosts."""
    origin = request.headers.get("origin")
    if origin is None:
        return False
    parts = urlsplit(origin)
    return (parts.netloc == request.headers.get("host")
            and parts.hostname in {h.strip("[]") for h in hosts})


# A path of this app: one slash, then no slash, backslash or control character first.
_LOCAL_PATH = re.compile(r"/(?![/\\])[^\x00-\x20\\]*")


def _back(form: Any) -> str:
    """Where to go after an action: a path of this app only."""
    target = str(form.get("next") or "/")
    return target if _LOCAL_PATH.fullmatch(target) else "/"


def _action_routes(actor: Client, token: str, hosts: Sequence[str]) -> list[BaseRoute]:
    def guarded(act: Callable[[Client, Any], None]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            form = await request.form()
            sent = str(form.get("csrf") or "")
            if not (hmac.compare_digest(sent.encode(), token.encode())
                    and _same_origin(request, hosts)):
                return PlainTextResponse("refused: missing or wrong CSRF token or origin",
                                         status_code=403)
            try:
                await run_in_threadpool(act, actor, form)
            except RunqError as error:  # no such run, wrong state, busy session, bad key
                return PlainTextResponse(f"refused: {error.message}", status_code=409)
            except (KeyError, ValueError) as error:
                return PlainTextResponse(f"refused: a bad or missing field ({error})",
                                         status_code=400)
            return RedirectResponse(_back(form), status_code=303)

        return endpoint

    def reason(form: Any) -> str | None:
        return str(form.get("reason") or "") or None

    def run_id(form: Any) -> int:
        value = _run_id(str(form["run_id"]))
        if value is None:
            raise KeyError("run_id")
        return value

    def cancel(client: Client, form: Any) -> None:
        client.cancel(run_id(form), reason(form))

    def redrive(client: Client, form: Any) -> None:
        client.redrive(run_id(form), reason(form))

    def pause(client: Client, form: Any) -> None:
        client.pause(str(form["scope"]), str(form["key"]), reason(form))

    def resume(client: Client, form: Any) -> None:
        client.resume(str(form["scope"]), str(form["key"]))

    return [Route(f"/actions/{act.__name__}", guarded(act), methods=["POST"])
            for act in (cancel, redrive, pause, resume)]
