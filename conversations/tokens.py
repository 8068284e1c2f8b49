"""API tokens (README, HTTP API): created by `manage.py create_api_token`, checked by the API's bearer
authentication (buddy/auth.py), revoked by `revoke_api_token` or the admin. Only a token's SHA-256 is
stored; the token itself is seen once, when it is created."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone

from conversations.models import ApiToken
from conversations.prepared import PreparedQuery

TOKEN_PREFIX = "bdy_"
LAST_USED_RESOLUTION_SECONDS = 60  # a write per request would serialise SQLite


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser) -> str:
    """Create a token and return it; only its hash is kept, so this is the one time it is seen."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, key_hash=token_hash(token), prefix=token[:12])
    return token


# A token's row with its user, by the token's hash: every bearer request's first read.
_TOKEN_OF_HASH = PreparedQuery(
    lambda key_hash: ApiToken.objects.select_related("user").filter(key_hash=key_hash).order_by("pk")[:1],
    key_hash=str,
)


def api_token_user(*, token: str) -> AbstractBaseUser | None:
    """The active user a token belongs to, or None; notes when it was last used (to the minute)."""
    found = _TOKEN_OF_HASH.rows(key_hash=token_hash(token))
    api_token = found[0] if found else None
    if api_token is None or not api_token.user.is_active:
        return None
    now = timezone.now()
    if api_token.last_used_at is None or (now - api_token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
        ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
    return api_token.user


def api_tokens_revoke(*, user: AbstractBaseUser | None = None, tokens: QuerySet[ApiToken] | None = None) -> int:
    """Revoke (delete) every token of `user`, or the `tokens` given; returns how many."""
    if (user is None) == (tokens is None):
        raise ValueError("give a user or tokens, not both")
    deleted, _ = (ApiToken.objects.filter(user=user) if tokens is None else tokens).delete()
    return deleted
