"""One background job per burst of a chat's turns (docs/memory.md): a job is queued for a key (a
session id) at once when none was queued for it in the last `span` seconds, else once when that span
ends. A burst of turns queues one job when it starts and one after its last turn, never one a turn.
Per process; the vector job and the summary job each have one."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import connection

logger = logging.getLogger(__name__)


class Bursts:
    KEPT = 10_000  # keys remembered before the ones whose span has ended are dropped

    def __init__(self, queue: Callable[[int], None], *, span: float, name: str) -> None:
        self.queue = queue
        self.span = span
        self.name = name
        self._queued: dict[int, float] = {}  # key → when its last job was queued
        self._trailing: dict[int, threading.Timer] = {}  # keys whose job waits for the span's end
        self._lock = threading.Lock()

    def schedule(self, key: int) -> bool:
        """Queue `key`'s job now, or once when the span of the last one ends. True when queued now."""
        now = time.monotonic()
        with self._lock:
            queued_at = self._queued.get(key)
            if queued_at is not None and now - queued_at < self.span:
                if key not in self._trailing:
                    timer = threading.Timer(self.span - (now - queued_at), self._span_end, [key])
                    timer.daemon = True
                    self._trailing[key] = timer
                    timer.start()
                return False
            if len(self._queued) >= self.KEPT:
                for old in [other for other, at in self._queued.items() if now - at >= self.span]:
                    del self._queued[old]
            self._queued[key] = now
        try:
            self.queue(key)
        except BaseException:
            self.forget(key)
            raise
        return True

    def _span_end(self, key: int) -> None:
        with self._lock:
            self._trailing.pop(key, None)
            self._queued[key] = time.monotonic()
        try:
            self.queue(key)
        except Exception:
            logger.exception("could not queue the %s job of %s", self.name, key)
        finally:
            connection.close()  # this timer's thread ends here

    def forget(self, key: int) -> None:
        """`key`'s job runs (inline, in this process): the next schedule queues one again at once."""
        with self._lock:
            self._queued.pop(key, None)

    def clear(self) -> None:
        """Forget every key and cancel the jobs waiting for their span's end (the tests, between tests)."""
        with self._lock:
            for timer in self._trailing.values():
                timer.cancel()
            self._trailing.clear()
            self._queued.clear()
