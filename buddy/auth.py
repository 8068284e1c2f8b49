"""API authentication: the Django session cookie (with CSRF) or a bearer token (README, HTTP API)."""

from __future__ import annotations

import hashlib
import secrets

from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer, SessionAuth

from conversations.models import ApiToken

TOKEN_PREFIX = "bdy_"

# Why the credentials a request carried were refused, for its 401 (set on the request).
CREDENTIALS_PROBLEM = "buddy_credentials_problem"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class BearerTokenAuth(HttpBearer):
    def __call__(self, request: HttpRequest):
        # Parsed here rather than by ninja, which logs a header of another scheme whole (a token in it).
        header = request.headers.get(self.header)
        if not header:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            setattr(request, CREDENTIALS_PROBLEM, "The Authorization header must be `Bearer <token>`.")
            return None
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str):
        api_token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(token)).first()
        if api_token is None or not api_token.user.is_active:
            setattr(request, CREDENTIALS_PROBLEM, "The bearer token is invalid or has been revoked.")
            return None
        now = timezone.now()
        # Touch last_used_at at most once a minute: a write per request would serialise SQLite.
        if api_token.last_used_at is None or (now - api_token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        request.user = api_token.user
        return api_token.user


class SessionCookieAuth(SessionAuth):
    """The session cookie. Its CSRF check (403) applies only to a request the cookie logs in: one with
    no valid credentials is a 401 whatever its method."""

    def __call__(self, request: HttpRequest):
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)


api_auth = [BearerTokenAuth(), SessionCookieAuth()]
