"""Fixtures every pytest test in tests/ builds on.

    server_url  the server (RUNQ_DATABASE_URL); its database is the admin one
    db_url      a fresh database with runq deployed, dropped after the test
    conn        an autocommit superuser connection to db_url
    connect     a factory for more autocommit connections to db_url

runq is loaded once per session from sql/runq.sql into a template database;
each test gets a clone (CREATE DATABASE ... TEMPLATE), which is much cheaper
than deploying again. Names carry the pid so two sessions never collide.
"""
import os
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pgutil import (
    ROOT,
    create_database,
    drop_database,
    drop_orphaned_databases,
    psql,
    unique_name,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "plpgsql_check: needs the plpgsql_check extension, which the PostgreSQL 18 "
        "run (make test-pg18) does not have: it deselects these by this name")


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
