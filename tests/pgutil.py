"""Small helpers the fixtures and the migration tests share.

Everything shells out to the PostgreSQL client tools (psql, pg_dump) and
sqitch the way a user would, so the tests exercise the real install paths.
"""
import itertools
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent


def _pg_bin() -> Path:
    """The PostgreSQL programs of the server under test: scripts/pg's, which
    are RUNQ_PG_BIN's (`make` sets it), else 15's, else the venv's 18."""
    found = subprocess.run([str(ROOT / "scripts" / "pg"), "bin"], capture_output=True,
                           text=True, check=False)
    if found.returncode != 0:
        raise RuntimeError(found.stderr.strip())
    return Path(found.stdout.strip())


PG_BIN = _pg_bin()


_names = itertools.count()


def unique_name(prefix: str) -> str:
    """A database name no other test or session uses (tests run one at a time
    per session, but several sessions may share a server)."""
    return f"{prefix}_{os.getpid()}_{next(_names)}"


def pg_tool(name: str) -> str:
    """The server's own version of a tool: pg_dump refuses a server newer than
    itself, and /usr/bin's wrappers may pick another installed version."""
    path = PG_BIN / name
    return str(path) if path.exists() else name


def with_dbname(url: str, dbname: str) -> str:
    """The same server URL pointing at another database (query kept)."""
    m = re.fullmatch(r"(postgres(?:ql)?://[^/?]*)(/[^?]*)?(\?.*)?", url)
    if not m:
        raise ValueError(f"not a postgresql:// URL: {url!r}")
    return f"{m.group(1)}/{dbname}{m.group(3) or ''}"


def sqitch_target(url: str) -> str:
    """sqitch spells postgresql://... as db:pg://..."""
    return "db:pg:" + url.split(":", 1)[1]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a tool from the repository root, capturing output; on failure the
    assertion message carries stderr so a red test says why."""
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def psql(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(pg_tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, *args,
               check=check)


def sqitch(command: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run("sqitch", command, *args, sqitch_target(url))


def create_database(server_url: str, name: str, template: str = "template0") -> str:
    """Create database `name` (replacing a leftover of a crashed run) and
    return its URL."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)))
    return with_dbname(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


# Databases named by unique_name, tests/run, scripts/gen-api-doc and demo/demo.py:
# runq_<what>_<pid>...
_SESSION_DB = re.compile(r"runq_(?:template|test|sqitch|clone|pgtap|docs|demo)_(\d+)(?:_\d+)?")


def drop_orphaned_databases(server_url: str) -> None:
    """Drop the databases of test sessions that were killed before their
    teardown, so they do not pile up on the throwaway cluster. Only on a
    server on this machine: a pid says nothing about another host's sessions."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        host = admin.info.host
        if not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
            return
        for (name,) in admin.execute("SELECT datname FROM pg_database").fetchall():
            m = _SESSION_DB.fullmatch(name)
            if m and not Path(f"/proc/{m.group(1)}").exists():
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


# runq.name( in SQL text: a call of runq's function name. INSERT INTO
# runq.run_events (columns) names a table that shares a function's name.
_RUNQ_CALL = re.compile(r"(\bINTO\s+)?\brunq\.(\w+)\s*\(", re.IGNORECASE)


def runq_calls(text: str) -> set[str]:
    """The names of the runq functions that SQL text calls."""
    return {m.group(2) for m in _RUNQ_CALL.finditer(text) if not m.group(1)}


def as_owner(*command: str) -> list[str]:
    """pg_ctl refuses root: run it as postgres, as scripts/pg does."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pgbouncer_bin() -> str:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    assert Path(found).exists(), \
        "pgbouncer is not installed (Debian package pgbouncer; .ci/run installs it)"
    return found


@dataclass
class Bouncer:
    """A PgBouncer in transaction pooling mode in front of a test database
    (conftest.py's ``bouncer``)."""

    url: str          # runq's test database through PgBouncer (pool of 2 server connections)
    one_url: str      # the same database through a pool of ONE server connection
    log: Path

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def guard_thread(body: Callable[[], None], errors: list[BaseException],
                 stop: threading.Event) -> Callable[[], None]:
    """body, to run in a thread: what it raises is kept in errors for the
    main thread to report, and stop is set so that the other threads end."""
    def run() -> None:
        try:
            body()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
            stop.set()
    return run
