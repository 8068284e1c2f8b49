"""API authentication: the Django session cookie (with CSRF) or a bearer token (README, HTTP API)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from conversations.connections import connection_lend_back
from conversations.tokens import api_token_user

# Why the credentials a request carried were refused, for its 401 (set on the request).
CREDENTIALS_PROBLEM = "buddy_credentials_problem"


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
        user = api_token_user(token=token)
        connection_lend_back()  # the request may now wait seconds for its turn
        if user is None:
            setattr(request, CREDENTIALS_PROBLEM, "The bearer token is invalid or has been revoked.")
            return None
        request.user = user
        return user


class SessionCookieAuth(SessionAuth):
    """The session cookie. Its CSRF check (403) applies only to a request the cookie logs in: one with
    no valid credentials is a 401 whatever its method."""

    def __call__(self, request: HttpRequest):
        authenticated = request.user.is_authenticated
        connection_lend_back()
        if not authenticated:
            return None
        return super().__call__(request)


api_auth = [BearerTokenAuth(), SessionCookieAuth()]
