"""The dashboard in a real browser: headless Chromium (Debian's chromium and
chromedriver) driven by Selenium, against uvicorn serving runq.dashboard on
a real database with runs in every status.

Two servers share one database: a read-only one, connected as a login role
that is a member of runq_observer only, and one with --allow-actions,
connected as a member of runq_observer and runq_admin. With
RUNQ_SCREENSHOTS=DIR (make dashboard-screenshots) each page is also saved
as DIR/<page>.png.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from pgutil import create_database, drop_database, free_port, unique_name
from psycopg.conninfo import make_conninfo
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

import runq
from runq.dashboard import main, parser
from runq.dashboard.app import PAGE_SIZE, create_app

pytestmark = pytest.mark.once

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = os.environ.get("RUNQ_SCREENSHOTS")
SHORT = timedelta(milliseconds=1)
READER, ADMIN = "runq_dash_reader", "runq_dash_admin"


@dataclass
class Seeded:
    url: str
    fenced: int  # a run whose epoch 1 was fenced, now running under epoch 2
    failed: list[int]
    waiting: int
    queued: list[int]
    answered: int  # waited for its user, was answered, runs again
    cancellable: int
    redrivable: int
    all_ids: list[int]
    family: dict[str, int]  # a parent waiting for its children, by key ("root": the parent)


def _seed(url: str) -> Seeded:
    """Runs in every status for two tenants, two kinds and two classes; a
    fenced epoch, an uncertain tool call, a checkpoint, an input, usage
    against a budget, a deadline; a limit, a pause and a schedule."""
    with psycopg.connect(url, autocommit=True) as conn:
        c = runq.Client(conn)
        conn.execute(f"""
            DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER}') THEN
                    CREATE ROLE {READER} LOGIN;
                END IF;
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ADMIN}') THEN
                    CREATE ROLE {ADMIN} LOGIN;
                END IF;
            END $$""")
        conn.execute(f"GRANT runq_observer TO {READER}")
        conn.execute(f"GRANT runq_observer, runq_admin TO {ADMIN}")

        def submit(tenant: str, kind: str, priority: int, **kw: Any) -> int:
            return c.submit(tenant, kind, {"task": "summarise"}, priority=priority, **kw).run_id

        def claimed(run_id: int, priority: int, **kw: Any) -> int:
            got = c.claim([priority], worker_id="worker-a", max_runs=1, **kw)
            assert [g.run_id for g in got] == [run_id]
            return got[0].epoch

        # Terminal runs first (older ids), each claimed and ended alone.
        failed = []
        for i in range(3):
            rid = submit("acme", "agent.research", 10)
            c.fail(rid, claimed(rid, 10),
                   {"code": "tool_error", "message": f"search timed out {i}"})
            failed.append(rid)
        for i in range(4):
            rid = submit("globex" if i % 2 else "acme", "agent.chat", 0)
            c.complete(rid, claimed(rid, 0), {"answer": i})
        # An hour of history for the chart: runs claimed and finished in
        # earlier minutes (their events moved back: a fixture).
        history = []
        for i in range(90):
            rid = submit("globex" if i % 3 else "acme", "agent.chat", 10)
            epoch = claimed(rid, 10)
            if i % 9 == 0:
                c.fail(rid, epoch, {"code": "model_error", "message": "overloaded"})
                c.redrive(rid, "retry after the outage")
                c.complete(rid, claimed(rid, 10), {"answer": i})
            else:
                c.complete(rid, epoch, {"answer": i})
            history.append(rid)
        conn.execute("""
            UPDATE runq.run_events
               SET created_at = created_at - ((run_id * 7 %% 59) + 1) * interval '1 minute'
             WHERE run_id = ANY(%s)""", (history,))
        gone = submit("globex", "agent.chat", 10)
        c.cancel(gone, "user left")

        # The fenced run: epoch 1's lease expires, the sweep requeues it
        # (a back-off of 1 ms), epoch 2 claims it, epoch 1's late heartbeat is
        # fenced.
        conn.execute("UPDATE runq.settings SET backoff_base = '1 ms', backoff_cap = '1 ms'")
        fenced = submit("acme", "agent.research", 0, budget={"cost_usd": Decimal("2.00")},
                        timeout=timedelta(hours=2))
        e1 = claimed(fenced, 0, lease=SHORT)
        assert c.begin_tool(fenced, e1, "call-1", "send_email", "non_idempotent",
                            {"to": "ops@example.com"})
        assert c.begin_tool(fenced, e1, "call-2", "web_search", "idempotent", {"q": "runq"})
        assert c.record_usage(fenced, e1, {"cost_usd": Decimal("0.40"), "input_tokens": 1200})
        time.sleep(0.01)
        assert [(a.run_id, a.action) for a in c.sweep()] == [(fenced, "requeued")]
        time.sleep(0.01)
        e2 = claimed(fenced, 0, lease=timedelta(hours=1))
        assert e2 == e1 + 1
        assert c.heartbeat(fenced, e1) is False
        assert c.checkpoint(fenced, e2, {"step": 3})
        assert c.record_usage(fenced, e2, {"cost_usd": Decimal("1.10")})

        # Waiting for its user, then one answered and running again.
        waiting = submit("globex", "agent.chat", 0, session_id="s-42")
        assert c.ask_user(waiting, claimed(waiting, 0), {"q": "Which account, personal or work?"})
        answered = submit("acme", "agent.chat", 0, session_id="s-7")
        assert c.ask_user(answered, claimed(answered, 0), {"q": "Send it?"})
        assert c.deliver_input(answered, {"text": "yes, send it"})
        claimed(answered, 0)

        # A backlog over two pages, of both tenants, kinds and classes.
        queued = [submit("acme" if i % 3 else "globex",
                         "agent.chat" if i % 2 else "agent.research", 0 if i % 4 else 10)
                  for i in range(PAGE_SIZE + 12)]
        cancellable, redrivable = queued[-1], failed[-1]

        c.set_limit("tenant", "globex", 8)
        c.pause("kind", "agent.nightly", "vendor outage")
        c.create_schedule("nightly-digest", "acme", "agent.digest", cron="0 3 * * *")

        # A family in class 5: a plan waiting for its children, research
        # (succeeded, with usage) and draft (running), and draft's child
        # cite (queued).
        root = submit("acme", "agent.plan", 5)
        e_root = claimed(root, 5)
        research = c.spawn(root, e_root, "research", "agent.research")
        assert research is not None
        e_research = claimed(research, 5)
        assert c.record_usage(research, e_research, {"cost_usd": Decimal("0.25"),
                                                     "input_tokens": 900})
        assert c.complete(research, e_research, {"sources": 3})
        draft = c.spawn(root, e_root, "draft", "agent.write")
        assert draft is not None
        e_draft = claimed(draft, 5, lease=timedelta(hours=1))
        cite = c.spawn(draft, e_draft, "cite", "agent.cite")
        assert cite is not None
        assert c.wait_children(root, e_root)
        family = {"root": root, "research": research, "draft": draft, "cite": cite}
        all_ids = [r[0] for r in conn.execute(
            "SELECT run_id FROM runq.runs ORDER BY run_id DESC").fetchall()]
    return Seeded(url, fenced, failed, waiting, queued, answered, cancellable, redrivable,
                  all_ids, family)


@pytest.fixture(scope="module")
def seeded(server_url: str, template_db: str) -> Iterator[Seeded]:
    name = unique_name("runq_dash")
    url = create_database(server_url, name, template=template_db)
    try:
        yield _seed(url)
    finally:
        drop_database(server_url, name)


class _Server:
    """uvicorn in a thread, on a free port of 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def reader_site(seeded: Seeded) -> Iterator[str]:
    app = create_app(make_conninfo(seeded.url, user=READER), refresh_seconds=60)
    with _Server(app) as base:
        yield base


@pytest.fixture(scope="module")
def admin_site(seeded: Seeded) -> Iterator[str]:
    app = create_app(make_conninfo(seeded.url, user=ADMIN), allow_actions=True,
                     refresh_seconds=60)
    with _Server(app) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1280,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def superuser(seeded: Seeded) -> Iterator[runq.Client]:
    with runq.Client.connect(seeded.url) as client:
        yield client


def _open(browser: WebDriver, url: str, shot: str | None = None) -> None:
    browser.get(url)
    assert browser.find_element(By.CSS_SELECTOR, "nav strong").text == "runq"
    if SHOTS and shot:
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1280, max(700, min(int(height) + 160, 2400)))
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / f"{shot}.png"))
        browser.set_window_size(1280, 1000)


def _wait(browser: WebDriver, done: Callable[[WebDriver], object]) -> None:
    """Until done(browser) is true; an element replaced meanwhile (the page
    navigated or refreshed itself) is looked up again."""
    WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(done)


def _cells(browser: WebDriver, table: str) -> list[list[str]]:
    return _cells_of(browser, f"table#{table}")


def _cells_of(browser: WebDriver, css: str) -> list[list[str]]:
    """The text of each data row's cells, read in one script: atomic even
    while the page refreshes itself."""
    rows: list[list[str]] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tr'))"
        ".slice(1).map(r => Array.from(r.cells).map(c => c.innerText.trim()))", css)
    return rows


def _ids(browser: WebDriver, table: str) -> list[int]:
    ids: list[str] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), r => r.dataset.runId)",
        f"table#{table} tr[data-run-id]")
    return [int(i) for i in ids]


def _links(browser: WebDriver, css: str) -> list[tuple[str, str]]:
    """The text and href of each link css matches, read in one script."""
    links: list[list[str]] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " a => [a.innerText.trim(), a.getAttribute('href')])", css)
    return [(text, href) for text, href in links]


def _post(url: str, fields: dict[str, str], *, origin: str | None = None,
          host: str | None = None) -> tuple[int, str, str | None]:
    """status, body and Location of a form POST, redirects not followed."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if origin is not None:
        headers["Origin"] = origin
    if host is not None:
        headers["Host"] = host
    request = urllib.request.Request(url, urllib.parse.urlencode(fields).encode(), headers)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers["Location"]
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers["Location"]


def _token(browser: WebDriver, base: str) -> str:
    """The CSRF token the site's forms carry."""
    browser.get(base + "/")
    field = browser.find_element(By.CSS_SELECTOR, "#pause-form input[name=csrf]")
    return str(field.get_attribute("value"))


# -- pages ------------------------------------------------------------------------

def test_overview_shows_the_queue_the_chart_orphans_limits_and_pauses(
        browser: WebDriver, reader_site: str, superuser: runq.Client) -> None:
    _open(browser, reader_site + "/", "overview")
    want = [[str(s.priority), str(s.ready), str(s.scheduled), str(s.running),
             str(s.waiting_for_user), str(s.waiting_for_children), str(s.failed)]
            for s in superuser.queue_stats()]
    assert [row[:7] for row in _cells(browser, "queue-stats")] == want
    assert ["5", "1", "0", "1", "0", "1", "0"] in want  # the family's class
    # The chart: a point per minute of the hour for each line, and the
    # totals of runq.throughput over it.
    for line in ("started", "finished"):
        points = browser.find_element(By.ID, line).get_attribute("points") or ""
        assert len(points.split()) == 60
    since = datetime.fromisoformat(
        browser.find_element(By.ID, "throughput").get_attribute("data-since") or "")
    rows = superuser.throughput(since)
    heading = browser.find_element(By.CSS_SELECTOR, "#throughput h2").text
    assert heading == (f"Last hour: {sum(r.started for r in rows)} started, "
                       f"{sum(r.finished for r in rows)} finished")
    assert sum(r.started for r in rows) >= 10
    assert browser.find_element(By.ID, "fenced").text == "1"
    assert browser.find_element(By.ID, "requeued").text == "1"
    orphans = browser.find_element(By.ID, "orphans").text
    assert "worker-a" in orphans
    assert _cells_of(browser, "#limits table")[0][:3] == ["tenant", "globex", "8"]
    assert _cells_of(browser, "#pauses table")[0][:3] == ["kind", "agent.nightly", "vendor outage"]


def test_overview_refreshes_itself_in_place(browser: WebDriver, seeded: Seeded,
                                            superuser: runq.Client) -> None:
    app = create_app(make_conninfo(seeded.url, user=READER), refresh_seconds=0.5)
    with _Server(app) as base:
        _refreshes(browser, base, superuser)


def _refreshes(browser: WebDriver, base: str, superuser: runq.Client) -> None:
    browser.get(base + "/")
    browser.execute_script("window.notReloaded = true")
    superuser.submit("initech", "agent.chat", priority=31000)
    _wait(browser,
        lambda b: any(row[0] == "31000" for row in _cells(b, "queue-stats")))
    assert browser.execute_script("return window.notReloaded") is True
    assert [row[:2] for row in _cells(browser, "queue-stats") if row[0] == "31000"] == \
        [["31000", "1"]]


def test_runs_are_paged_newest_first(browser: WebDriver, reader_site: str,
                                     seeded: Seeded, superuser: runq.Client) -> None:
    everything = [r.run_id for r in superuser.list_runs(max_runs=1000)]
    _open(browser, reader_site + "/runs", "runs")
    first = _ids(browser, "runs")
    assert first == everything[:PAGE_SIZE]
    browser.find_element(By.ID, "next").click()
    second = _ids(browser, "runs")
    assert second == everything[PAGE_SIZE:2 * PAGE_SIZE]
    while browser.find_elements(By.ID, "next"):
        browser.find_element(By.ID, "next").click()
        second += _ids(browser, "runs")
    assert first + second == everything
    # A page that ends exactly at the oldest run offers no empty next page.
    browser.get(f"{reader_site}/runs?before={everything[-PAGE_SIZE - 1]}")
    assert _ids(browser, "runs") == everything[-PAGE_SIZE:]
    assert browser.find_elements(By.ID, "next") == []


def test_runs_filter_by_status_tenant_and_kind(browser: WebDriver, reader_site: str,
                                               superuser: runq.Client) -> None:
    browser.get(reader_site + "/runs")
    Select(browser.find_element(By.NAME, "status")).select_by_visible_text("queued")
    browser.find_element(By.NAME, "tenant_id").send_keys("globex")
    browser.find_element(By.NAME, "kind").send_keys("agent.research")
    browser.find_element(By.CSS_SELECTOR, "#filters button").click()
    _wait(browser, lambda b: "tenant_id=globex" in b.current_url)
    want = [r.run_id for r in superuser.list_runs("queued", "globex", "agent.research",
                                                  max_runs=1000)]
    assert len(want) >= 3
    assert _ids(browser, "runs") == want
    assert {tuple(row[1:4]) for row in _cells(browser, "runs")} == \
        {("queued", "globex", "agent.research")}
    # A status the queue does not know is refused with the server's words.
    browser.get(reader_site + "/runs?status=stuck")
    assert "stuck" in browser.find_element(By.ID, "error").text


def test_the_run_page_shows_the_fenced_epoch_tools_checkpoints_usage_and_deadline(
        browser: WebDriver, reader_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    _open(browser, f"{reader_site}/runs/{seeded.fenced}", "run")
    assert browser.find_element(By.ID, "status").text == "running"
    assert "epoch 1" in browser.find_element(By.ID, "fenced-note").text
    events = browser.find_elements(By.CSS_SELECTOR, "table#events tr[data-type]")
    shown = [(e.get_attribute("data-type"), e.find_elements(By.TAG_NAME, "td")[1].text,
              "alert" in (e.get_attribute("class") or "")) for e in events]
    stored = [(e.type, str(e.epoch), e.type in ("run.fenced", "run.requeued"))
              for e in superuser.run_events(seeded.fenced)]
    assert shown == stored
    assert ("run.fenced", "1", True) in shown and ("run.requeued", "1", True) in shown
    tools = {row[0]: row for row in _cells(browser, "tool-calls")}
    assert tools["call-1"][1:4] == ["send_email", "non_idempotent", "uncertain ⚠ outcome unknown"]
    assert tools["call-2"][1:4] == ["web_search", "idempotent", "retryable ↻ may run again"]
    marked = {r.get_attribute("data-status"): r.get_attribute("class")
              for r in browser.find_elements(By.CSS_SELECTOR, "table#tool-calls tr[data-status]")}
    assert marked == {"uncertain": "alert", "retryable": "notice"}
    assert [row[0] for row in _cells(browser, "checkpoints")] == ["2"]
    assert _cells(browser, "usage") == [["cost_usd", "1.50", "2.00"],
                                        ["input_tokens", "1200", ""]]
    run = superuser.get_run(seeded.fenced)
    assert run.deadline is not None
    assert browser.find_element(By.ID, "deadline").text == \
        run.deadline.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_the_run_page_shows_the_output_as_it_is_written(
        browser: WebDriver, reader_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    # The running run (epoch 2) writes while its page is open: the page, read
    # again every second while the run may still write, shows each chunk.
    _open(browser, f"{reader_site}/runs/{seeded.fenced}", "run-output")
    assert browser.find_element(By.ID, "no-output").text == "No output."
    assert superuser.emit(seeded.fenced, 2, ["Hello", {"step": 1}])
    _wait(browser, lambda b: len(_cells(b, "output")) == 2)
    assert superuser.emit(seeded.fenced, 2, [", world"])
    _wait(browser, lambda b: len(_cells(b, "output")) == 3)
    shown = [(seq, epoch, chunk) for seq, epoch, _, chunk in _cells(browser, "output")]
    assert shown == [("1", "2", "Hello"), ("2", "2", '{\n  "step": 1\n}'), ("3", "2", ", world")]


def test_the_run_page_shows_the_parent_and_the_childrens_tree(
        browser: WebDriver, reader_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    f = seeded.family
    _open(browser, f"{reader_site}/runs/{f['root']}", "run-children")
    assert browser.find_element(By.ID, "status").text == "waiting_for_children"
    assert browser.find_element(By.ID, "parent").text == "none"
    assert _ids(browser, "children") == [f["research"], f["draft"], f["cite"]]
    depths = browser.execute_script(
        "return Array.from(document.querySelectorAll('table#children tr[data-run-id]'),"
        " r => r.dataset.depth)")
    assert depths == ["1", "1", "2"]
    assert _cells(browser, "children") == [
        ["research", str(f["research"]), "agent.research", "succeeded",
         "cost_usd 0.25, input_tokens 900"],
        ["draft", str(f["draft"]), "agent.write", "running", ""],
        ["└ cite", str(f["cite"]), "agent.cite", "queued", ""]]
    assert [c.usage for c in superuser.children(f["root"])] == [
        {"cost_usd": Decimal("0.25"), "input_tokens": 900}, {}]
    # Each child links to its page, which links back to its parent. (Read in
    # one script each: these pages refresh themselves every second.)
    assert _links(browser, "table#children a") == [
        (str(r), f"/runs/{r}") for r in (f["research"], f["draft"], f["cite"])]
    browser.get(f"{reader_site}/runs/{f['draft']}")
    assert _links(browser, "#parent a") == [(f"run {f['root']}", f"/runs/{f['root']}")]
    assert "agent.plan waiting_for_children" in browser.find_element(By.ID, "parent").text
    assert _ids(browser, "children") == [f["cite"]]
    browser.get(f"{reader_site}/runs/{f['cite']}")
    assert _links(browser, "#parent a") == [(f"run {f['draft']}", f"/runs/{f['draft']}")]
    assert browser.find_element(By.ID, "no-children").text == "No children."
    # The runs page filters by the new status.
    browser.get(reader_site + "/runs?status=waiting_for_children")
    assert _ids(browser, "runs") == [f["root"]]
    assert "waiting_for_children" in [o.text for o in Select(
        browser.find_element(By.NAME, "status")).options]


def test_the_run_page_shows_inputs_and_an_unknown_run_is_404(
        browser: WebDriver, reader_site: str, seeded: Seeded) -> None:
    browser.get(f"{reader_site}/runs/{seeded.answered}")
    assert "yes, send it" in browser.find_element(By.ID, "inputs").text
    status, _ = _get(f"{reader_site}/runs/987654321")
    assert status == 404


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_dead_letter_waiting_and_schedules(browser: WebDriver, reader_site: str,
                                           seeded: Seeded) -> None:
    _open(browser, reader_site + "/dead-letter", "dead-letter")
    assert _ids(browser, "dead-letter") == sorted(seeded.failed, reverse=True)
    assert browser.find_element(By.ID, "dead-letter-total").text == "3 failed runs."
    assert {(row[3], row[4]) for row in _cells(browser, "dead-letter")} == \
        {("tool_error", f"search timed out {i}") for i in range(3)}
    _open(browser, reader_site + "/waiting", "waiting")
    assert _ids(browser, "waiting") == [seeded.waiting]
    assert "Which account, personal or work?" in browser.find_element(By.ID, "waiting").text
    _open(browser, reader_site + "/schedules", "schedules")
    row = _cells(browser, "schedules")[0]
    assert row[:5] == ["nightly-digest", "acme", "agent.digest", "0 3 * * *", "UTC"]


# -- actions -----------------------------------------------------------------------

def test_without_the_flag_no_page_offers_an_action_and_no_route_writes(
        browser: WebDriver, reader_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    for path in ("/", "/runs", f"/runs/{seeded.cancellable}", f"/runs/{seeded.redrivable}",
                 "/dead-letter", "/waiting", "/schedules"):
        browser.get(reader_site + path)
        assert browser.find_elements(By.CSS_SELECTOR, "form[method=post]") == [], path
        assert browser.find_element(By.CSS_SELECTOR, "nav .mode").text == "read-only"
    for action in ("cancel", "redrive", "pause", "resume"):
        status, _, _ = _post(f"{reader_site}/actions/{action}",
                             {"csrf": "x", "run_id": str(seeded.cancellable), "scope": "kind",
                              "key": "agent.chat"}, origin=reader_site)
        assert status in (404, 405), action
    app = create_app(seeded.url)
    assert {m for r in app.routes for m in (getattr(r, "methods", None) or {"GET"})} <= \
        {"GET", "HEAD"}
    assert superuser.get_run(seeded.cancellable).status == "queued"
    assert [p.key for p in superuser.pauses()] == ["agent.nightly"]


def test_with_the_flag_cancel_redrive_pause_and_resume_work(
        browser: WebDriver, admin_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    browser.get(f"{admin_site}/runs/{seeded.cancellable}")
    assert browser.find_element(By.CSS_SELECTOR, "nav .mode").text == "actions on"
    browser.find_element(By.CSS_SELECTOR, "button[data-action=cancel]").click()
    _wait(browser,
        lambda b: b.find_element(By.ID, "status").text == "cancelled")
    assert superuser.get_run(seeded.cancellable).status == "cancelled"

    _open(browser, admin_site + "/dead-letter", "dead-letter-actions")
    row = browser.find_element(By.CSS_SELECTOR, f"tr[data-run-id='{seeded.redrivable}']")
    row.find_element(By.CSS_SELECTOR, "button[data-action=redrive]").click()
    _wait(browser, lambda b: seeded.redrivable not in _ids(b, "dead-letter"))
    assert superuser.get_run(seeded.redrivable).status == "queued"

    browser.get(admin_site + "/")
    Select(browser.find_element(By.CSS_SELECTOR, "#pause-form select")).select_by_visible_text(
        "tenant")
    browser.find_element(By.CSS_SELECTOR, "#pause-form input[name=key]").send_keys("acme")
    browser.find_element(By.CSS_SELECTOR, "#pause-form input[name=reason]").send_keys("audit")
    browser.find_element(By.CSS_SELECTOR, "#pause-form button").click()
    _wait(browser,
        lambda b: ["tenant", "acme", "audit"] in [r[:3] for r in _cells_of(b, "#pauses table")])
    assert {(p.scope, p.key) for p in superuser.pauses()} == \
        {("kind", "agent.nightly"), ("tenant", "acme")}
    for row in browser.find_elements(By.CSS_SELECTOR, "#pauses table tr"):
        if "acme" in row.text:
            row.find_element(By.CSS_SELECTOR, "button[data-action=resume]").click()
            break
    _wait(browser,
        lambda b: "acme" not in b.find_element(By.ID, "pauses").text)
    assert {(p.scope, p.key) for p in superuser.pauses()} == {("kind", "agent.nightly")}


def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused(
        browser: WebDriver, admin_site: str, seeded: Seeded, superuser: runq.Client) -> None:
    victim = seeded.queued[0]
    token = _token(browser, admin_site)
    url = f"{admin_site}/actions/cancel"
    port = admin_site.rsplit(":", 1)[1]
    refused = [
        _post(url, {"run_id": str(victim)}, origin=admin_site),  # no token
        _post(url, {"run_id": str(victim), "csrf": ""}, origin=admin_site),
        _post(url, {"run_id": str(victim), "csrf": token + "x"}, origin=admin_site),
        _post(url, {"run_id": str(victim), "csrf": token}, origin="http://evil.example"),
        _post(url, {"run_id": str(victim), "csrf": token}),  # no Origin
        # Another site's name rebound to 127.0.0.1: its Origin is its Host.
        _post(url, {"run_id": str(victim), "csrf": token}, origin=f"http://evil.example:{port}",
              host=f"evil.example:{port}"),
    ]
    assert [status for status, _, _ in refused] == [403] * 5 + [400]
    assert superuser.get_run(victim).status == "queued"
    # Such a site cannot read a page either, nor the token in it.
    status, body, _ = _get_as(admin_site + "/", host=f"evil.example:{port}")
    assert status == 400 and token not in body
    # The same request with the token and this origin is done, and goes back
    # to a path of this app only.
    for target in ("//evil.example", "/\\evil.example", "http://evil.example"):
        victim = seeded.queued.pop(0)
        status, _, location = _post(url, {"run_id": str(victim), "csrf": token, "next": target},
                                    origin=admin_site)
        assert (status, location) == (303, "/"), target
        assert superuser.get_run(victim).status == "cancelled"
    status, _, location = _post(url, {"run_id": str(seeded.queued.pop(0)), "csrf": token,
                                      "next": "/runs?status=cancelled"}, origin=admin_site)
    assert (status, location) == (303, "/runs?status=cancelled")


def _get_as(url: str, host: str) -> tuple[int, str, str | None]:
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), None
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), None


def test_bad_query_strings_are_400_or_404_not_500(reader_site: str) -> None:
    for path, want in (("/runs?before=99999999999999999999999", 400),
                       ("/runs?before=-1", 400),
                       ("/runs?before=abc", 400),
                       ("/waiting?before=99999999999999999999999", 400),
                       ("/runs/99999999999999999999999", 404),
                       ("/runs?tenant_id=%00", 400),
                       ("/runs?status=stuck", 400)):
        assert _get(reader_site + path)[0] == want, path


def test_the_dashboard_listens_on_localhost_by_default() -> None:
    args = parser().parse_args(["--database-url", "postgresql://x"])
    assert args.host == "127.0.0.1"
    assert args.allow_actions is False


def test_actions_beyond_this_machine_need_a_second_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--database-url", "postgresql://x", "--host", "0.0.0.0", "--allow-actions"])
    assert exit.value.code == 2
    assert "no login" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["--refresh", "-1"])


def test_pages_read_as_runq_observer_and_actions_run_as_runq_admin(seeded: Seeded) -> None:
    """Even connected as a superuser, pages read as runq_observer, which
    may not write; actions run as runq_admin."""
    app = create_app(seeded.url, allow_actions=True)
    with _Server(app) as base:
        assert _get(base + "/metrics")[0] == 200
        with app.state.read_pool.connection() as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("runq_observer",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT runq.cancel(%s)", (seeded.queued[1],))
        with app.state.action_pool.connection() as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("runq_admin",)
