"""Database connections across `fork()`: a child process never uses its parent's.

django-q2's cluster (`manage.py qcluster`) forks its sentinel, workers, monitor and pusher from a
process that has already used the database. A forked child holds copies of the parent's open
connections (the same sockets) and, on PostgreSQL with `BUDDY_DB_POOL`, of psycopg's pool with its
idle connections: two processes then talk over one socket and both see the other's answers
(`unexpected result EMPTY_QUERY from command 'BEGIN'`). In the child, right after the fork, the
inherited connections and pools are dropped without closing them (closing would end the parent's
sessions too) and kept from the garbage collector for the same reason; the child opens its own on
first use: one connection, kept BUDDY_DB_CONN_MAX_AGE seconds, without a pool (the cluster's
processes run one task at a time, and a pool per process would keep a few connections each).
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

# What each child inherited: never closed, never collected (a psycopg connection or pool closes its
# socket when collected, and the socket is the parent's).
_inherited: list[Any] = []
_registered = False


def connections_forget_inherited() -> None:
    """Drop this process's database connections and connection pools without closing them, and pool
    no more: run in a child right after `fork()`."""
    for alias in connections:
        database = connections.settings[alias]  # the very dict each connection of `alias` reads
        if database.get("OPTIONS", {}).get("pool"):
            database["OPTIONS"] = {key: value for key, value in database["OPTIONS"].items() if key != "pool"}
            database["CONN_MAX_AGE"] = settings.BUDDY_DB_CONN_MAX_AGE
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _inherited.append(connection.connection)
            connection.connection = None  # the next query connects (Django resets its state there)
        pools = getattr(type(connection), "_connection_pools", None)  # PostgreSQL: class-level
        if pools:
            _inherited.extend(pools.values())
            pools.clear()


def fork_safety_register() -> None:
    """Make every child forked from now on forget its parent's connections (once per process)."""
    global _registered
    if not _registered:
        os.register_at_fork(after_in_child=connections_forget_inherited)
        _registered = True


def connection_lend_back() -> None:
    """With psycopg's pool (BUDDY_DB_POOL), give this thread's connection back to the pool before it
    waits for seconds (a turn on the model, a request on its turn): a pool smaller than the threads
    serves them all, and the next query borrows one again. Never inside a transaction."""
    current = connections[DEFAULT_DB_ALIAS]
    if getattr(current, "pool", None) is not None and not current.in_atomic_block:
        current.close()
