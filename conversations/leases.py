"""Leases: one holder at a time of a piece of work (a session's turn, its summary job, its vector
job), across processes, without a transaction held while the work runs (docs/architecture.md).

A lease is an expiry time in a column of one row: free when the column is empty or in the past. Taking
it is one conditional UPDATE, atomic on every database; a holder that dies leaves a lease that
expires; renewing it proves the holder is alive. A lease kept in a table of its own is a row that
exists while the lease is held (`lease_row_take`; deleting the row releases it).

A holder whose work may wait long on something else (a model call) keeps its lease with a
LeaseHeartbeat, which renews it every few seconds, so the lease can be short and a dead holder's work
is taken over within seconds (README: Settings, BUDDY_TURN_LEASE_SECONDS).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

logger = logging.getLogger(__name__)


def lease_take(rows: QuerySet, *, field: str, ttl: timedelta, **also: Any) -> bool:
    """Take the lease in `field` of the row `rows` selects if it is free; `also`: other columns to set
    with it (e.g. the holder's id). Returns whether it was taken."""
    now = timezone.now()
    free = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": now})
    return bool(rows.filter(free).update(**{field: now + ttl}, **also))


def lease_take_returning(
    model: type[Model],
    *,
    pk: Any,
    field: str,
    ttl: timedelta,
    returning: tuple[str, ...],
    holder: str | None = None,
    **also: Any,
) -> tuple | None:
    """`lease_take` for the row of `model` with primary key `pk`, in the same one conditional UPDATE,
    answering the fields `returning` of the row as the UPDATE left it (`UPDATE … RETURNING`, on both
    databases): what the holder would otherwise read again right after taking the lease. None when
    the lease was not free. The values come as the database driver gives them (no field conversion).

    `holder`: the field naming the holder, emptied on release; a row whose holder is empty is free
    whatever its expiry (a renewal that raced the release may have extended a released lease: on
    PostgreSQL an UPDATE whose filter joins another table re-checks only the primary key)."""
    meta = model._meta
    quote = connection.ops.quote_name
    now = timezone.now()
    values = {field: now + ttl, **also}
    assignments = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in values)
    params = [meta.get_field(name).get_db_prep_save(value, connection) for name, value in values.items()]
    lease_column = quote(meta.get_field(field).column)
    released = f" OR {quote(meta.get_field(holder).column)} = ''" if holder else ""
    columns = ", ".join(quote(meta.get_field(name).column) for name in returning)
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
        f" AND ({lease_column} IS NULL OR {lease_column} < %s{released}) RETURNING {columns}"
    )
    params += [pk, meta.get_field(field).get_db_prep_value(now, connection)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()  # to the end: SQLite keeps the statement's write open until then
    return rows[0] if rows else None


def lease_renew(rows: QuerySet, *, field: str, ttl: timedelta) -> bool:
    """Extend the lease of the row `rows` selects (its filter names the holder); whether it still was."""
    return bool(rows.update(**{field: timezone.now() + ttl}))


def lease_release(rows: QuerySet, *, field: str, **also: Any) -> None:
    """Free the lease of the row `rows` selects (its filter names the holder)."""
    rows.update(**{field: None}, **also)


def lease_row_take(model: type[Model], *, ttl: timedelta, **key: Any) -> bool:
    """Take the lease kept in a row of its own: the row of `model` that `key` names (its primary key),
    with its expiry in `expires_at`. An expired row's lease is taken over; without a row, a new one is
    the lease. False while another holder's row has not expired."""
    if lease_take(model._default_manager.filter(**key), field="expires_at", ttl=ttl):
        return True
    try:
        with transaction.atomic():
            model._default_manager.create(**key, expires_at=timezone.now() + ttl)
    except IntegrityError:  # held, or taken by another process since the UPDATE above
        return False
    return True


class LeaseHeartbeat:
    """Calls `renew` every `every` seconds until stopped or `renew` answers False (the lease is no
    longer the holder's: whoever holds it decides what that means).

    Most holders let go before their first renewal is due (a turn whose model answers within seconds),
    so starting a heartbeat starts no thread: the process's one scheduling thread (`_Beats`) waits for
    every heartbeat's first beat, and only a heartbeat still running then gets a thread of its own,
    which renews from then on and closes its database connection when it ends. A renewal that waits
    on the database therefore holds up its own lease only. Stopping never waits for a renewal."""

    def __init__(self, renew: Callable[[], bool], *, every: float, name: str = "lease-heartbeat") -> None:
        self.renew = renew
        self.every = every
        self.name = name
        self.stopped = threading.Event()

    def start(self) -> LeaseHeartbeat:
        _beats.add(self)
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _beat(self) -> bool:
        """One renewal; whether to go on."""
        try:
            return bool(self.renew())
        except Exception:  # a busy database: the next beat tries again, well within the lease
            logger.warning("could not renew a lease (%s)", self.name, exc_info=True)
            return True

    def _run(self) -> None:
        """On the heartbeat's own thread, from its first beat on."""
        try:
            while not self.stopped.is_set() and self._beat() and not self.stopped.wait(self.every):
                pass
        finally:
            connection.close()


class _Beats:
    """The thread that waits for every heartbeat's first beat (a heap by time) and gives each one still
    running then a thread of its own. It never touches the database, and waits on a condition while
    nothing is due."""

    def __init__(self) -> None:
        self.ready = threading.Condition(threading.Lock())
        self.due: list[tuple[float, int, LeaseHeartbeat]] = []
        self.order = itertools.count()  # ties on the time: first come, first served
        self.thread: threading.Thread | None = None

    def add(self, heartbeat: LeaseHeartbeat, delay: float | None = None) -> None:
        at = time.monotonic() + (heartbeat.every if delay is None else delay)
        with self.ready:
            heapq.heappush(self.due, (at, next(self.order), heartbeat))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="lease-heartbeats", daemon=True)
                self.thread.start()
            elif self.due[0][2] is heartbeat:
                self.ready.notify()  # due before the one the thread waits for

    def _next(self) -> list[LeaseHeartbeat]:
        """Wait until some heartbeats are due; take them (stopped ones are dropped on the way)."""
        with self.ready:
            while True:
                while self.due and self.due[0][2].stopped.is_set():
                    heapq.heappop(self.due)
                if not self.due:
                    self.ready.wait()
                    continue
                now = time.monotonic()
                if self.due[0][0] > now:
                    self.ready.wait(self.due[0][0] - now)
                    continue
                taken = []
                while self.due and self.due[0][0] <= now:
                    taken.append(heapq.heappop(self.due)[2])
                return taken

    def _run(self) -> None:
        while True:
            for heartbeat in self._next():
                if heartbeat.stopped.is_set():
                    continue
                try:
                    threading.Thread(target=heartbeat._run, name=heartbeat.name, daemon=True).start()
                except Exception:  # no thread to be had now: try again shortly, well within the lease
                    logger.warning("could not start the heartbeat %s", heartbeat.name, exc_info=True)
                    self.add(heartbeat, delay=min(heartbeat.every, 0.5))

    def forget(self) -> None:
        """In a child process right after `fork()`: the parent's thread and lock are not the child's."""
        self.ready = threading.Condition(threading.Lock())
        self.due = []
        self.thread = None


_beats = _Beats()
os.register_at_fork(after_in_child=_beats.forget)
