"""Django's PostgreSQL backend (`ENGINE: "buddy.postgresql"`, set by buddy/settings.py), with one
change to psycopg's pool (BUDDY_DB_POOL, docs/deploy.md).

With health checks on (CONN_HEALTH_CHECKS, which Buddy sets), Django has the pool check every
connection it lends with a round trip to the server. A turn borrows a connection several times (it
gives its own back while it waits on the model), and so does each request and socket call: a round
trip each, for connections that were in use a moment before. Here a connection lent again within
CHECK_AFTER_SECONDS of its last lending, so back in the pool for less than that, is lent without the
check; one that may have waited longer (a server restarted, a connection cut while idle) is checked
as before, and replaced when it fails.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

CHECK_AFTER_SECONDS = 1.0


def check_unless_just_lent(conn) -> None:
    """psycopg's pool check (ConnectionPool.check_connection), skipped for a connection lent less than
    CHECK_AFTER_SECONDS ago: the time it spent in the pool since is shorter still."""
    now = time.monotonic()
    lent_at = getattr(conn, "_buddy_lent_at", None)
    if lent_at is None or now - lent_at >= CHECK_AFTER_SECONDS:
        ConnectionPool.check_connection(conn)  # raises for a broken connection: the pool replaces it
    conn._buddy_lent_at = now


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        # Django builds the pool with check=ConnectionPool.check_connection when health checks are on.
        if pool is not None and pool._check is ConnectionPool.check_connection:
            pool._check = check_unless_just_lent
        return pool
