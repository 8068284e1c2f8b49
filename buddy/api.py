"""The one NinjaAPI; each app contributes a router (contract §4)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from buddy.auth import api_auth
from conversations.api import router as conversations_router
from memory.api import router as memory_router

api = NinjaAPI(
    title="Buddy API",
    version="1",
    description="Talk to Buddy and read its memory. Authenticate with the session cookie (plus the CSRF "
    "token for POST) or `Authorization: Bearer <token>` from `manage.py create_api_token`.",
    auth=api_auth,
    docs_url="/api/docs",
    openapi_url="/api/openapi.json",
    urls_namespace="api",
)


@api.exception_handler(AuthenticationError)
def not_authenticated(request: HttpRequest, exc: AuthenticationError):
    if request.headers.get("Authorization", "").lower().startswith("bearer "):
        detail = "The bearer token is not valid: it was revoked or mistyped (manage.py create_api_token makes one)."
    else:
        detail = "Authentication credentials were not provided."
    return api.create_response(request, {"detail": detail}, status=401)


@api.exception_handler(ValidationError)
def invalid_input(request: HttpRequest, exc: ValidationError):
    return api.create_response(request, {"detail": exc.errors}, status=422)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError):
    # Ninja answers a body it cannot parse with 400; the contract calls every invalid input 422.
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        return api.create_response(request, {"detail": "The request body is not valid JSON."}, status=422)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


api.add_router("", conversations_router)
api.add_router("", memory_router)
