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


def _threads_named(prefix: str) -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith(prefix)]


@pytest.fixture
def heartbeats():
    """Heartbeats a test starts, stopped when it ends whatever happened."""
    started: list[LeaseHeartbeat] = []

    def start(renew: Callable[[], bool], every: float, name: str) -> LeaseHeartbeat:
        heartbeat = LeaseHeartbeat(renew, every=every, name=name).start()
        started.append(heartbeat)
        return heartbeat

    yield start
    for heartbeat in started:
        heartbeat.stop()


def test_heartbeats_that_stop_before_their_first_beat_start_no_thread(heartbeats):
    """A turn whose model answers within seconds costs no thread for its lease's heartbeat."""
    renewed = []
    short = [heartbeats(lambda: renewed.append(1) or True, 0.2, f"hb-short-{n}") for n in range(20)]
    assert _threads_named("hb-short-") == []
    for heartbeat in short:
        heartbeat.stop()
    time.sleep(0.4)
    assert renewed == [] and _threads_named("hb-short-") == []


def test_a_heartbeat_still_running_at_its_first_beat_renews_on_a_thread_of_its_own_never_early(heartbeats):
    beats: list[float] = []
    threads: set[str] = set()

    def renew() -> bool:
        beats.append(time.monotonic())
        threads.add(threading.current_thread().name)
        return True

    started = time.monotonic()
    heartbeats(renew, 0.1, "hb-long")
    _wait_until(lambda: len(beats) >= 3)
    assert threads == {"hb-long"}
    times = [started, *beats]
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= 0.095


def test_a_renewal_stuck_on_the_database_holds_up_its_own_lease_only(heartbeats):
    stuck, others = threading.Event(), []

    def blocked() -> bool:
        stuck.wait(10)
        return True

    heartbeats(blocked, 0.05, "hb-stuck")
    heartbeats(lambda: others.append(1) or True, 0.05, "hb-other")
    _wait_until(lambda: len(others) >= 5)
    stuck.set()


def test_a_heartbeat_due_sooner_than_the_one_waited_for_beats_on_time(heartbeats):
    beats = []
    heartbeats(lambda: True, 30, "hb-later")
    heartbeats(lambda: beats.append(1) or True, 0.05, "hb-sooner")
    _wait_until(lambda: beats, timeout=5)  # not after the 30 s the scheduler was waiting for


def test_a_heartbeat_ends_when_stopped_or_when_its_lease_is_lost_and_goes_on_after_an_error(heartbeats):
    calls = {"stopped": 0, "lost": 0, "failing": 0}

    def counted(name: str, answer: bool = True) -> Callable[[], bool]:
        def renew() -> bool:
            calls[name] += 1
            if name == "failing" and calls[name] == 1:
                raise RuntimeError("database busy")
            return answer

        return renew

    stopped = heartbeats(counted("stopped"), 0.05, "hb-stopped")
    heartbeats(counted("lost", answer=False), 0.05, "hb-lost")
    failing = heartbeats(counted("failing"), 0.05, "hb-failing")
    _wait_until(lambda: calls["stopped"] >= 1 and calls["lost"] >= 1 and calls["failing"] >= 3)
    stopped.stop()
    failing.stop()
    at_stop = dict(calls)
    time.sleep(0.3)
    assert calls["stopped"] <= at_stop["stopped"] + 1  # a renewal under way may still end
    assert calls["failing"] <= at_stop["failing"] + 1
    assert calls["lost"] == 1  # False: the lease is someone else's, no more renewals
    assert _threads_named("hb-stopped") == _threads_named("hb-lost") == []
