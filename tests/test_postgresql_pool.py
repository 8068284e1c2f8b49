"""buddy/postgresql/base.py: psycopg's pool lends a connection it lent a moment ago without the check's
round trip, and checks (and replaces when broken) one that may have sat in the pool longer. PostgreSQL
only."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from buddy.postgresql import base as backend
from devtools.servers import ROOT, server_env

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only: psycopg's pool")


@pytest.fixture
def pool(db):
    params = connection.get_connection_params()
    params["autocommit"] = True
    pool = ConnectionPool(kwargs=params, min_size=1, max_size=1, check=backend.check_unless_just_lent, open=True)
    yield pool
    pool.close()


@pytest.fixture
def checks(monkeypatch) -> list[int]:
    """The backend pids the real check ran on."""
    ran: list[int] = []

    class Counted:
        @staticmethod
        def check_connection(conn):
            ran.append(conn.info.backend_pid)
            ConnectionPool.check_connection(conn)

    monkeypatch.setattr(backend, "ConnectionPool", Counted)
    return ran


def _terminate(pid: int) -> None:
    with psycopg.connect(**{**connection.get_connection_params(), "autocommit": True}) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_lent_again_at_once_is_not_checked_and_one_lent_longer_ago_is(pool, checks, monkeypatch):
    monkeypatch.setattr(backend, "CHECK_AFTER_SECONDS", 60)  # "at once", however loaded the machine
    first = pool.getconn()
    pid = first.info.backend_pid
    pool.putconn(first)
    again = pool.getconn()
    assert again.info.backend_pid == pid and checks == [pid]  # the first lending only
    pool.putconn(again)
    monkeypatch.setattr(backend, "CHECK_AFTER_SECONDS", 0)
    pool.putconn(pool.getconn())
    assert checks == [pid, pid]


def test_a_connection_broken_while_it_waited_in_the_pool_is_replaced(pool, monkeypatch):
    first = pool.getconn()
    pid = first.info.backend_pid
    pool.putconn(first)
    _terminate(pid)  # a server restart, a connection cut while idle
    monkeypatch.setattr(backend, "CHECK_AFTER_SECONDS", 0)  # it waited long enough to be checked
    with pool.connection() as replacement:
        assert replacement.execute("SELECT 1").fetchone() == (1,)
        assert replacement.info.backend_pid != pid


def test_djangos_pool_uses_the_check(db):
    """As deployed (BUDDY_DB_POOL on; the suite itself runs without a pool): Buddy's backend, whose pool
    checks with check_unless_just_lent, lends connections that work."""
    code = (
        "import django; django.setup(); from django.db import connection; "
        "[(connection.cursor().execute('SELECT 1'), connection.close()) for _ in range(3)]; "
        "pool = connection.pool; "
        "print(connection.settings_dict['ENGINE'], pool._check.__name__, pool.get_stats()['requests_num'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=server_env(BUDDY_DB_POOL="4"), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["buddy.postgresql", "check_unless_just_lent", "3"]
