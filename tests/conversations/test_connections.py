"""A forked child never uses its parent's database connection (conversations.connections): django-q2's
cluster forks its workers from a process that has used the database."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections

pytestmark = pytest.mark.django_db(transaction=True)


def _backend_id() -> Any:
    """What tells two database sessions apart: PostgreSQL's backend pid; SQLite has none to read."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _in_child(report: Any) -> dict[str, Any]:
    """Fork; in the child run `report()` and send its answer back; in the parent return it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, json.dumps(report()).encode())
            connection.close()  # the child's own connection
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def test_a_forked_child_connects_on_its_own_and_the_parent_keeps_its_connection():
    connection.ensure_connection()
    parent = connection.connection
    parent_backend = _backend_id()

    def report() -> dict[str, Any]:
        inherited = connection.connection is parent
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            one = cursor.fetchone()[0]
        return {
            "inherited": inherited,
            "one": one,
            "same_connection": connection.connection is parent,
            "backend": _backend_id(),
        }

    child = _in_child(report)
    assert child == {"inherited": False, "one": 1, "same_connection": False, "backend": child["backend"]}
    if parent_backend is not None:
        assert child["backend"] != parent_backend
    # The parent's connection was neither closed nor used by the child.
    assert connection.connection is parent
    assert _backend_id() == parent_backend
    with connection.cursor() as cursor:
        cursor.execute("SELECT 2")
        assert cursor.fetchone()[0] == 2


def test_a_forked_child_starts_without_its_parents_connection_pools_and_pools_no_more():
    database = connections["default"]
    pools = getattr(type(database), "_connection_pools", None)
    if pools is None:
        pytest.skip("PostgreSQL only: psycopg's pools")
    options, max_age = database.settings_dict.get("OPTIONS", {}), database.settings_dict["CONN_MAX_AGE"]
    pools["forked-test"] = object()
    database.settings_dict["OPTIONS"] = {**options, "pool": {"max_size": 4}}
    database.settings_dict["CONN_MAX_AGE"] = 0
    try:
        child = _in_child(
            lambda: {
                "pools": sorted(pools),
                "pool_option": database.settings_dict["OPTIONS"].get("pool"),
                "max_age": database.settings_dict["CONN_MAX_AGE"],
            }
        )
    finally:
        pools.pop("forked-test", None)
        database.settings_dict["OPTIONS"], database.settings_dict["CONN_MAX_AGE"] = options, max_age
    assert child == {"pools": [], "pool_option": None, "max_age": settings.BUDDY_DB_CONN_MAX_AGE}
