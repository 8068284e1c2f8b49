"""Rate limits shared by every transport (README, Limits): counters in fixed windows, in the database.

A limit is `limit` events per `period` seconds per key. The windows are fixed (aligned on the epoch),
so a client may spend one window's allowance at its end and the next one's at the start of the next;
the answer to a refused event says when its window ends (HTTP `Retry-After`).

In front of the shared counter, a socket keeps a PromptBucket of its own: a flood of prompts on one
socket is refused in memory, without a database write per frame (docs/security.md).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agent.models import RateCounter
from agent.turn import TurnError

# Counters older than this are deleted as new windows open: longer than any period in use.
COUNTER_RETENTION = timedelta(days=1)


class RateLimited(TurnError):
    """Too many prompts; `retry_after` seconds until the window ends (HTTP `Retry-After`)."""

    code = "rate_limited"

    def __init__(self, detail: str, retry_after: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(f"{detail} Try again in {self.retry_after} s.")


def _window(period: int, now: datetime) -> tuple[datetime, float]:
    """The start of the window holding `now`, and the seconds left in it."""
    epoch_seconds = now.timestamp()
    start = epoch_seconds - epoch_seconds % period
    return datetime.fromtimestamp(start, UTC), start + period - epoch_seconds


def rate_count(*, key: str, period: int, now: datetime | None = None) -> tuple[int, float]:
    """How many events `key` had in the current window, and the seconds until it ends."""
    start, left = _window(period, now or timezone.now())
    count = RateCounter.objects.filter(key=key, window_start=start).values_list("count", flat=True).first()
    return count or 0, left


@transaction.atomic
def rate_record(*, key: str, period: int, now: datetime | None = None) -> int:
    """Count one event of `key`; returns the window's count including it."""
    now = now or timezone.now()
    start, _ = _window(period, now)
    counter = RateCounter.objects.filter(key=key, window_start=start)
    if not counter.update(count=F("count") + 1):
        try:
            with transaction.atomic():
                RateCounter.objects.create(key=key, window_start=start, count=1)
        except IntegrityError:  # another process opened the window first
            counter.update(count=F("count") + 1)
        else:
            RateCounter.objects.filter(window_start__lt=now - COUNTER_RETENTION).delete()
    return counter.values_list("count", flat=True).get()


def prompt_rate_check(*, user_id: int) -> None:
    """Count a user's prompt (HTTP or WebSocket); RateLimited past BUDDY_PROMPTS_PER_MINUTE."""
    limit = settings.BUDDY_PROMPTS_PER_MINUTE
    if limit <= 0:
        return
    count = rate_record(key=f"prompt:{user_id}", period=60)
    if count > limit:
        _, left = _window(60, timezone.now())
        raise RateLimited(f"Too many prompts: at most {limit} a minute.", left)


class PromptBucket:
    """A token bucket of BUDDY_PROMPTS_PER_MINUTE prompts, refilled evenly over a minute, kept by one
    socket in its process. It never allows more than the shared counter (prompt_rate_check, still asked
    for every prompt it lets through) would over a minute; it only answers a burst without the database."""

    def __init__(self, *, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.tokens = float(per_minute)
        self.updated = clock()

    def take(self) -> None:
        """Spend one prompt, or raise RateLimited (saying when the next one is allowed) when none is left."""
        if self.per_minute <= 0:
            return
        now = self.clock()
        rate = self.per_minute / 60
        self.tokens = min(float(self.per_minute), self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens < 1:
            raise RateLimited(f"Too many prompts: at most {self.per_minute} a minute.", (1 - self.tokens) / rate)
        self.tokens -= 1


def _login_keys(*, username: str, address: str) -> list[tuple[str, int]]:
    """The counters of a login attempt and their limits: per user name (hashed: any text is a valid
    key), and per client address."""
    name = hashlib.sha256(username.strip().lower().encode("utf-8", errors="replace")).hexdigest()[:40]
    return [
        (f"login:name:{name}", settings.BUDDY_LOGIN_FAILURES),
        (f"login:addr:{address[:64]}", settings.BUDDY_LOGIN_FAILURES_PER_IP),
    ]


def login_attempt_check(*, username: str, address: str) -> None:
    """Refuse (RateLimited) a login attempt while the name or the address has had too many failed ones
    in the current window (BUDDY_LOGIN_WINDOW_SECONDS); checked before the password is."""
    period = settings.BUDDY_LOGIN_WINDOW_SECONDS
    for key, limit in _login_keys(username=username, address=address):
        if limit <= 0:
            continue
        count, left = rate_count(key=key, period=period)
        if count >= limit:
            raise RateLimited("Too many failed logins.", left)


def login_failure_record(*, username: str, address: str) -> None:
    period = settings.BUDDY_LOGIN_WINDOW_SECONDS
    for key, limit in _login_keys(username=username, address=address):
        if limit > 0:
            rate_record(key=key, period=period)
