"""The one lease helper (conversations/leases.py), on the turn lease columns of a session and on a
lease kept in a row of its own (memory's summary leases)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.leases import lease_release, lease_renew, lease_row_take, lease_take, lease_take_returning
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
