"""The one NinjaAPI; each app contributes a router. Every error is JSON `{"detail": ...}` (README)."""

from __future__ import annotations

import math

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from agent.api import router as agent_router
from agent.limits import RateLimited
from agent.submit import ChatNotFound
from agent.turn import ModelFailed, PromptInvalid, PromptTooLarge, TurnError, TurnRunning
from buddy.auth import CREDENTIALS_PROBLEM, api_auth
from buddy.views import request_too_large_detail
from conversations.api import router as conversations_router
from memory.api import router as memory_router
from memory.notes_api import router as notes_router

api = NinjaAPI(
    title="Buddy API",
    version="1",
    description="Talk to Buddy and read its memory. Authenticate with the session cookie (plus the CSRF "
    "token for POST) or `Authorization: Bearer <token>` from `manage.py create_api_token`. Every error "
    'is `{"detail": ...}`.',
    auth=api_auth,
    docs_url="/api/docs",
    openapi_url="/api/openapi.json",
    urls_namespace="api",
)


@api.exception_handler(AuthenticationError)
def not_authenticated(request: HttpRequest, exc: AuthenticationError):
    detail = getattr(request, CREDENTIALS_PROBLEM, "Authentication credentials were not provided.")
    response = api.create_response(request, {"detail": detail}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="buddy"'
    return response


@api.exception_handler(ValidationError)
def invalid_input(request: HttpRequest, exc: ValidationError):
    # Only where and why: pydantic's `input` would echo the whole bad value back, and its `ctx` may
    # hold an exception object, which is not JSON.
    errors = [
        {"type": error.get("type", "invalid"), "loc": list(error.get("loc", [])), "msg": error.get("msg", "")}
        for error in exc.errors
    ]
    return api.create_response(request, {"detail": errors}, status=422)


@api.exception_handler(RequestDataTooBig)
def too_large(request: HttpRequest, exc: RequestDataTooBig):
    return api.create_response(request, {"detail": request_too_large_detail()}, status=413)


@api.exception_handler(RateLimited)
def rate_limited(request: HttpRequest, exc: RateLimited):
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return response


# The HTTP status of each refusal of a turn (the services raise them; only this transport knows HTTP).
TURN_ERROR_STATUS: dict[type[TurnError], int] = {
    ChatNotFound: 404,
    TurnRunning: 409,
    PromptTooLarge: 413,
    PromptInvalid: 422,
    ModelFailed: 502,
}


@api.exception_handler(TurnError)
def turn_refused(request: HttpRequest, exc: TurnError):
    status = next((code for kind, code in TURN_ERROR_STATUS.items() if isinstance(exc, kind)), 500)
    return api.create_response(request, {"detail": str(exc)}, status=status)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError):
    # Ninja answers a body it cannot parse with 400; every invalid input is a 422 (README, "HTTP API").
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        return api.create_response(request, {"detail": "The request body is not valid JSON."}, status=422)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


api.add_router("", agent_router)
api.add_router("", conversations_router)
api.add_router("", memory_router)
api.add_router("", notes_router)
