"""API authentication: the Django session cookie (with CSRF) or a bearer token (contract §4)."""

from __future__ import annotations

import hashlib
import secrets

from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer, django_auth

from conversations.models import ApiToken

TOKEN_PREFIX = "bdy_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class BearerTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        api_token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(token)).first()
        if api_token is None or not api_token.user.is_active:
            return None
        now = timezone.now()
        # Touch last_used_at at most once a minute: a write per request would serialise SQLite.
        if api_token.last_used_at is None or (now - api_token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        request.user = api_token.user
        return api_token.user


api_auth = [BearerTokenAuth(), django_auth]
