"""Leases: one holder at a time of a piece of work (a session's turn, its summary job), across
processes, without a transaction held while the work runs (docs/architecture.md, "Leases").

A lease is an expiry time in a column of one row: free when the column is empty or in the past. Taking
it is one conditional UPDATE, atomic on every database; a holder that dies leaves a lease that
expires; renewing it proves the holder is alive.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone


def lease_take(rows: QuerySet, *, field: str, ttl: timedelta, **also: Any) -> bool:
    """Take the lease in `field` of the row `rows` selects if it is free; `also`: other columns to set
    with it (e.g. the holder's id). Returns whether it was taken."""
    now = timezone.now()
    free = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": now})
    return bool(rows.filter(free).update(**{field: now + ttl}, **also))


def lease_renew(rows: QuerySet, *, field: str, ttl: timedelta) -> bool:
    """Extend the lease of the row `rows` selects (its filter names the holder); whether it still was."""
    return bool(rows.update(**{field: timezone.now() + ttl}))


def lease_release(rows: QuerySet, *, field: str, **also: Any) -> None:
    """Free the lease of the row `rows` selects (its filter names the holder)."""
    rows.update(**{field: None}, **also)
