"""Fixtures every pytest test in tests/ builds on.

    server_url  the server (RUNQ_DATABASE_URL); its database is the admin one
    db_url      a fresh database with runq deployed, dropped after the test
    conn        an autocommit superuser connection to db_url
    connect     a factory for more autocommit connections to db_url
    bouncer     a PgBouncer in transaction pooling mode in front of db_url
    private_cluster  a cluster of the test's own, with runq deployed, and a
                way to restart it

runq is loaded once per session from sql/runq.sql into a template database;
each test gets a clone (CREATE DATABASE ... TEMPLATE), which is much cheaper
than deploying again. Names carry the pid so two sessions never collide.
"""
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pgutil import (
    PG_BIN,
    ROOT,
    Bouncer,
    as_owner,
    create_database,
    drop_database,
    drop_orphaned_databases,
    free_port,
    pgbouncer_bin,
    psql,
    unique_name,
    with_dbname,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "plpgsql_check: needs the plpgsql_check extension, which the PostgreSQL 18 "
        "run (make test-pg18) does not have: it deselects these by this name")
    config.addinivalue_line(
        "markers", "once: a whole program (a benchmark script, the demo, the dashboard in a "
        "browser) whose SQL the rest of the suite covers on every server, or a check of the "
        "repository's files alone (types, lint, static SQL), or the upgrade from a later release "
        "(the oldest release's upgrade deploys the same changes); the PostgreSQL 18 run deselects "
        "these to stay inside CI's time (CI runs make demo on 18 itself)")


@pytest.fixture(scope="session")
def server_url() -> str:
    url = os.environ.get("RUNQ_DATABASE_URL")
    if not url:
        pytest.exit("RUNQ_DATABASE_URL is not set: run `make test`, or set it to a "
                    "postgresql:// URL of a server where we may create databases", 2)
    return url


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    """Name of the session's database loaded from sql/runq.sql."""
    drop_orphaned_databases(server_url)
    name = f"runq_template_{os.getpid()}"
    url = create_database(server_url, name)
    psql(url, "-f", str(ROOT / "sql" / "runq.sql"))
    yield name
    drop_database(server_url, name)


@pytest.fixture
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    name = unique_name("runq_test")
    url = create_database(server_url, name, template=template_db)
    yield url
    drop_database(server_url, name)  # WITH (FORCE): leaked connections too


@pytest.fixture
def connect(db_url: str) -> Iterator[Callable[[], psycopg.Connection]]:
    opened: list[psycopg.Connection] = []

    def _connect() -> psycopg.Connection:
        c = psycopg.connect(db_url, autocommit=True)
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        c.close()


@pytest.fixture
def conn(connect: Callable[[], psycopg.Connection]) -> psycopg.Connection:
    return connect()


@pytest.fixture
def bouncer(db_url: str) -> Iterator[Bouncer]:
    """PgBouncer in transaction pooling mode in front of db_url, started from
    a config in a temporary directory; as the postgres OS user when the tests
    run as root (PgBouncer refuses root)."""
    target = psycopg.conninfo.conninfo_to_dict(db_url)
    server = " ".join(f"{key}={target[key]}" for key in ("host", "port", "user", "password")
                      if target.get(key))
    user = str(target.get("user") or pwd.getpwuid(os.getuid()).pw_name)
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="runq-pgbouncer-"))
    (workdir / "userlist.txt").write_text(f'"{user}" ""\n')
    # Two server connections for everything, so that clients really share
    # them; runq_one has a single one, which makes the prepared-statement
    # collision in test_pgbouncer.py certain rather than likely.
    (workdir / "pgbouncer.ini").write_text(f"""\
[databases]
runq = {server} dbname={target['dbname']} pool_size=2
runq_one = {server} dbname={target['dbname']} pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {workdir}/userlist.txt
pool_mode = transaction
max_client_conn = 100
default_pool_size = 2
logfile = {workdir}/pgbouncer.log
pidfile =
ignore_startup_parameters = extra_float_digits
""")
    command = [pgbouncer_bin()]
    if os.geteuid() == 0:  # PgBouncer will not run as root
        postgres = pwd.getpwnam("postgres")
        os.chown(workdir, postgres.pw_uid, postgres.pw_gid)
        for f in workdir.iterdir():
            os.chown(f, postgres.pw_uid, postgres.pw_gid)
        command += ["-u", "postgres"]
    workdir.chmod(0o755)
    proc = subprocess.Popen([*command, str(workdir / "pgbouncer.ini")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"postgresql://{user}@127.0.0.1:{port}/runq"
    bouncer = Bouncer(url, f"postgresql://{user}@127.0.0.1:{port}/runq_one",
                      workdir / "pgbouncer.log")
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, \
                f"pgbouncer exited {proc.returncode}: {proc.stdout and proc.stdout.read()}"
            try:
                with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as c:
                    assert c.execute("SELECT current_database()").fetchone() == (target["dbname"],)
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline, "pgbouncer did not accept connections in 10 s"
                time.sleep(0.05)
        yield bouncer
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def private_cluster() -> Iterator[tuple[str, Callable[[], None]]]:
    """(superuser URL of database runq_private with runq deployed, restart) on a
    cluster of our own (scripts/pg in a temp dir), so restarting it disturbs
    nobody; removed at the end."""
    workdir = Path(tempfile.mkdtemp(prefix="runq-private-"))
    workdir.chmod(0o755)  # the server runs as postgres
    env = {**os.environ, "RUNQ_PG_DIR": str(workdir / "pg")}
    try:
        proc = subprocess.run([str(ROOT / "scripts" / "pg"), "start"], env=env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"scripts/pg start failed:\n{proc.stdout}{proc.stderr}"
        url = create_database(proc.stdout.strip().splitlines()[-1], "runq_private")
        psql(url, "-f", str(ROOT / "sql" / "runq.sql"))

        def restart() -> None:
            data = workdir / "pg" / "data"
            done = subprocess.run(
                as_owner(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l",
                         str(workdir / "pg" / "server.log"), "-m", "fast", "-w", "-t", "60",
                         "restart"), capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"pg_ctl restart failed:\n{done.stdout}{done.stderr}"

        yield with_dbname(url, "runq_private"), restart
    finally:
        subprocess.run([str(ROOT / "scripts" / "pg"), "stop"], env=env,
                       capture_output=True, text=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
