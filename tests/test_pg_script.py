"""scripts/pg reuses a running throwaway cluster only while it runs the server
program installed now.

`make demo` leaves its cluster running for the next command; `make test` may
then install packages (pgTAP pulls in a newer postgresql-15), and a server
started from the replaced program cannot load the new libraries ("could not
load library plpgsql.so: undefined symbol"). A program at another path stands
in for the upgrade here: the running server is then not the one installed, and
`scripts/pg start` must restart it (same major: its databases kept) or make it
anew (another major: the venv's 18 after Debian's 15, or the reverse).
"""
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pgutil import ROOT

DEBIAN_15 = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="runq-pg-script-"))
    path.chmod(0o755)  # the server runs as postgres
    try:
        yield path
    finally:
        for bin_ in (None, "embedded"):
            pg(path, "stop", bin_=bin_, check=False)
        shutil.rmtree(path, ignore_errors=True)


def pg(workdir: Path, *args: str, bin_: str | None = None,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNQ_PG_DIR": str(workdir / "pg")}
    env.pop("RUNQ_PG_BIN", None)
    if bin_ is not None:
        env["RUNQ_PG_BIN"] = bin_
    proc = subprocess.run([str(ROOT / "scripts" / "pg"), *args], env=env,
                          capture_output=True, text=True, check=False)
    if check:
        assert proc.returncode == 0, f"scripts/pg {args} failed:\n{proc.stdout}{proc.stderr}"
    return proc


def server(url: str) -> tuple[int, object, int]:
    """(server_version_num, postmaster start time, plpgsql's answer)."""
    with psycopg.connect(url, autocommit=True) as conn:
        version, started = conn.execute(
            "SELECT current_setting('server_version_num')::int,"
            " pg_postmaster_start_time()").fetchone()  # type: ignore[misc]
        # plpgsql is what a stale server fails to load after an upgrade.
        conn.execute("CREATE OR REPLACE FUNCTION pg_temp.one() RETURNS int"
                     " LANGUAGE plpgsql AS 'BEGIN RETURN 1; END'")
        (one,) = conn.execute("SELECT pg_temp.one()").fetchone()  # type: ignore[misc]
    return version, started, one


def databases(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


# Debian's postgresql-15 is there wherever `make test` runs (scripts/install-deps).
@pytest.mark.once
def test_a_cluster_is_restarted_on_a_changed_program_and_remade_on_another_major(
        workdir: Path) -> None:
    url = pg(workdir, "start").stdout.split()[-1]
    version, started, _ = server(url)
    assert version // 10000 == 15
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE kept")

    # Started again with the program unchanged: the same server, untouched.
    again = pg(workdir, "start")
    assert again.stdout.split()[-1] == url and again.stderr == ""
    assert server(url)[1] == started

    # The same major's programs at another path, as an upgrade leaves them:
    # restarted on them, its databases kept.
    moved = workdir / "bin"
    moved.mkdir()
    for program in DEBIAN_15.iterdir():
        (moved / program.name).symlink_to(program)
    moved_start = pg(workdir, "start", bin_=str(moved))
    assert "restarting it" in moved_start.stderr
    url = moved_start.stdout.split()[-1]
    version, restarted, one = server(url)
    assert (version // 10000, one) == (15, 1) and restarted > started
    assert "kept" in databases(url)

    # Another major: made anew on it, throwaway as it is.
    remade = pg(workdir, "start", bin_="embedded")
    assert "is of PostgreSQL 15, the server here is 18: making it anew" in remade.stderr
    url = remade.stdout.split()[-1]
    assert server(url)[0] // 10000 == 18 and server(url)[2] == 1
    assert "kept" not in databases(url)

    # And back, as when Debian's 15 is installed after the demo ran on 18.
    back = pg(workdir, "start")
    assert "is of PostgreSQL 18, the server here is 15: making it anew" in back.stderr
    assert server(back.stdout.split()[-1])[0] // 10000 == 15


@pytest.mark.once
def test_starts_at_once_share_one_server(workdir: Path) -> None:
    # The lock: two commands starting the cluster at once get one server and
    # one URL (without it both started one, and the port file named the loser).
    env = {**os.environ, "RUNQ_PG_DIR": str(workdir / "pg")}
    starts = [subprocess.Popen([str(ROOT / "scripts" / "pg"), "start"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(3)]
    urls = {p.communicate(timeout=120)[0].split()[-1] for p in starts}
    assert all(p.returncode == 0 for p in starts)
    assert len(urls) == 1
    url = urls.pop()
    assert pg(workdir, "url").stdout.strip() == url
    server(url)
    # and the server holds no lock: stop (which takes it) does not wait for it
    pg(workdir, "stop")
    assert not (workdir / "pg").exists()
