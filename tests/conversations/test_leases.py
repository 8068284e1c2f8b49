"""The one lease helper (conversations/leases.py), on the turn lease columns of a session."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.leases import lease_release, lease_renew, lease_take
from conversations.models import Session

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
