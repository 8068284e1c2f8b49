"""The one lease helper (conversations/leases.py), on the turn lease columns of a session and on a
lease kept in a row of its own (memory's summary leases)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.leases import (
    LeaseHeartbeat,
    lease_release,
    lease_renew,
    lease_row_take,
    lease_take,
    lease_take_returning,
)
from conversations.models import Session
from memory.models import SummaryLease

pytestmark = pytest.mark.django_db

FIELD = "turn_lease_expires_at"
TTL = timedelta(minutes=5)


def _rows(session: Session, **holder):
    return Session.objects.filter(pk=session.pk, **holder)


def test_a_free_lease_is_taken_once_and_free_again_after_release(session):
    assert lease_take(_rows(session), field=FIELD, ttl=TTL, turn_lease_id="a")
    assert not lease_take(_rows(session), field=FIELD, ttl=TTL, turn_lease_id="b")
    session.refresh_from_db()
    assert session.turn_lease_id == "a" and session.turn_lease_expires_at > timezone.now()

    lease_release(_rows(session, turn_lease_id="a"), field=FIELD, turn_lease_id="")
    session.refresh_from_db()
    assert session.turn_lease_id == "" and session.turn_lease_expires_at is None
    assert lease_take(_rows(session), field=FIELD, ttl=TTL, turn_lease_id="b")


def test_an_expired_lease_is_free_and_only_its_holder_renews_or_releases_it(session):
    assert lease_take(_rows(session), field=FIELD, ttl=-TTL, turn_lease_id="dead")  # expired at once
    assert lease_take(_rows(session), field=FIELD, ttl=TTL, turn_lease_id="alive")

    assert not lease_renew(_rows(session, turn_lease_id="dead"), field=FIELD, ttl=TTL)
    lease_release(_rows(session, turn_lease_id="dead"), field=FIELD, turn_lease_id="")
    session.refresh_from_db()
    assert session.turn_lease_id == "alive"  # the dead holder freed nothing

    before = session.turn_lease_expires_at
    assert lease_renew(_rows(session, turn_lease_id="alive"), field=FIELD, ttl=TTL * 2)
    session.refresh_from_db()
    assert session.turn_lease_expires_at > before


def test_a_lease_taken_with_returning_answers_the_row_as_updated_and_only_when_free(session):
    Session.objects.filter(pk=session.pk).update(window_start_id=42)
    taken = lease_take_returning(
        Session, pk=session.pk, field=FIELD, ttl=TTL, returning=("window_start_id", "turn_lease_id"), turn_lease_id="a"
    )
    assert taken == (42, "a")
    again = lease_take_returning(Session, pk=session.pk, field=FIELD, ttl=TTL, returning=("id",), turn_lease_id="b")
    assert again is None
    session.refresh_from_db()
    assert session.turn_lease_id == "a" and session.turn_lease_expires_at > timezone.now()

    lease_release(_rows(session, turn_lease_id="a"), field=FIELD, turn_lease_id="")
    assert lease_take_returning(Session, pk=session.pk, field=FIELD, ttl=-TTL, returning=("id",), turn_lease_id="dead")
    # An expired lease is free: taken over, its expiry compared the way the ORM stores it.
    assert lease_take_returning(Session, pk=session.pk, field=FIELD, ttl=TTL, returning=("id",), turn_lease_id="b")
    assert not lease_take(_rows(session), field=FIELD, ttl=TTL, turn_lease_id="c")


def test_a_released_lease_a_late_renewal_extended_is_free_when_its_holder_is_named(session):
    """Released (no holder), then extended by a renewal that raced the release: free by its holder."""
    Session.objects.filter(pk=session.pk).update(turn_lease_id="", turn_lease_expires_at=timezone.now() + TTL)

    def take(lease_id: str, **holder: str) -> tuple | None:
        return lease_take_returning(
            Session, pk=session.pk, field=FIELD, ttl=TTL, returning=("turn_lease_id",), turn_lease_id=lease_id, **holder
        )

    assert take("x") is None  # by its expiry alone, still held
    assert take("x", holder="turn_lease_id") == ("x",)
    assert take("y", holder="turn_lease_id") is None  # held by "x" now


def test_a_lease_row_is_held_until_it_expires_or_is_deleted(session):
    assert lease_row_take(SummaryLease, ttl=TTL, session_id=session.pk)
    assert not lease_row_take(SummaryLease, ttl=TTL, session_id=session.pk)  # held: no second row, no takeover
    assert SummaryLease.objects.get().expires_at > timezone.now()

    SummaryLease.objects.filter(session_id=session.pk).update(expires_at=timezone.now() - TTL)  # its holder died
    assert lease_row_take(SummaryLease, ttl=TTL, session_id=session.pk)
    assert SummaryLease.objects.get().expires_at > timezone.now()

    SummaryLease.objects.filter(session_id=session.pk).delete()  # released
    assert lease_row_take(SummaryLease, ttl=TTL, session_id=session.pk)



def _wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_every_heartbeat_beats_on_one_thread_never_before_its_time():
    """A heartbeat costs no thread of its own: all of a process's renew on one, each every `every`."""
    beats: dict[str, list[float]] = {"fast": [], "slow": []}
    threads: set[str] = set()

    def renew(name: str) -> bool:
        beats[name].append(time.monotonic())
        threads.add(threading.current_thread().name)
        return True

    started = time.monotonic()
    fast = LeaseHeartbeat(lambda: renew("fast"), every=0.05).start()
    slow = LeaseHeartbeat(lambda: renew("slow"), every=0.2).start()
    running = threading.active_count()
    others = [LeaseHeartbeat(lambda: True, every=0.05).start() for _ in range(20)]
    assert threading.active_count() == running  # twenty more heartbeats, no thread more
    _wait_until(lambda: len(beats["fast"]) >= 4 and len(beats["slow"]) >= 3)
    for heartbeat in (fast, slow, *others):
        heartbeat.stop()
    assert threads == {"lease-heartbeats"}
    for name, every in (("fast", 0.05), ("slow", 0.2)):
        times = [started, *beats[name]]
        assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= every * 0.95


def test_a_heartbeat_ends_when_stopped_or_when_its_lease_is_lost_and_goes_on_after_an_error():
    calls = {"stopped": 0, "lost": 0, "failing": 0}

    def counted(name: str, answer: bool = True) -> Callable[[], bool]:
        def renew() -> bool:
            calls[name] += 1
            if name == "failing" and calls[name] == 1:
                raise RuntimeError("database busy")
            return answer

        return renew

    stopped = LeaseHeartbeat(counted("stopped"), every=0.05).start()
    LeaseHeartbeat(counted("lost", answer=False), every=0.05).start()
    failing = LeaseHeartbeat(counted("failing"), every=0.05).start()
    _wait_until(lambda: calls["stopped"] >= 1 and calls["lost"] >= 1 and calls["failing"] >= 3)
    stopped.stop()
    failing.stop()
    at_stop = dict(calls)
    time.sleep(0.3)
    assert calls["stopped"] <= at_stop["stopped"] + 1  # a renewal under way may still end
    assert calls["failing"] <= at_stop["failing"] + 1
    assert calls["lost"] == 1  # False: the lease is someone else's, no more renewals
