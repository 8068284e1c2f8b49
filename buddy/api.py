"""The one NinjaAPI; each app contributes a router. The only place HTTP statuses are chosen: its exception
handlers answer every refusal — the apps' domain exceptions (conversations.errors) and what Django and
ninja raise themselves — with its status and the one body `{"code", "detail"}` (plus `errors` for a 422),
the shape of `ErrorOut` (README: HTTP API, "Errors")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Router
from ninja.errors import AuthenticationError, HttpError, ValidationError

from agent.api import router as agent_router
from agent.chats_api import router as chats_router
from agent.limits import RateLimited
from agent.turn import ModelFailed, PromptTooLarge, TurnRunning
from buddy.auth import CREDENTIALS_PROBLEM, api_auth
from buddy.views import request_too_large_detail
from conversations.api import router as conversations_router
from conversations.errors import Conflict, DomainError, InvalidInput, NotFound
from conversations.refs import InvalidAgent, InvalidChatId
from memory.api import router as memory_router
from memory.notes_api import router as notes_router
from web.api import router as web_router

# Logged as Django logs a view's unhandled exception (and mails ADMINS where that is set up).
request_logger = logging.getLogger("django.request")

api = NinjaAPI(
    title="Buddy API",
    version="1",
    description="Talk to Buddy and read its memory. Authenticate with the session cookie (plus the CSRF "
    "token for unsafe methods) or `Authorization: Bearer <token>` from `manage.py create_api_token`. Every "
    'error is `{"code", "detail"}`: `code` is a stable machine code, `detail` a sentence; a 422 adds '
    '`"errors": [{"field", "message"}]` naming the fields as they were sent.',
    auth=api_auth,
    docs_url="/api/docs",
    openapi_url="/api/openapi.json",
    urls_namespace="api",
)

# The status of each kind of refusal (the most specific kind in an exception's MRO wins).
ERROR_STATUS: dict[type[DomainError], int] = {
    NotFound: 404,
    Conflict: 409,
    TurnRunning: 409,
    PromptTooLarge: 413,
    InvalidInput: 422,
    RateLimited: 429,
    ModelFailed: 502,
}

# The codes of what Django and ninja refuse before an app sees the request, with their status.
FRAMEWORK_ERRORS: dict[str, int] = {
    "not_authenticated": 401,
    "csrf_failed": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "too_large": 413,
    "invalid_json": 422,
    "internal_error": 500,
}

# Pydantic error types that are codes of their own (conversations.refs raises them in the schemas).
_CODE_ERROR_TYPES = {InvalidChatId.code, InvalidAgent.code}


def error_status(kind: type[DomainError]) -> int | None:
    return next((ERROR_STATUS[base] for base in kind.__mro__ if base in ERROR_STATUS), None)


def _answer(
    request: HttpRequest, status: int, code: str, detail: str, *, errors: list[dict[str, Any]] | None = None
) -> HttpResponse:
    body: dict[str, Any] = {"code": code, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    return api.create_response(request, body, status=status)


@api.exception_handler(DomainError)
def refused(request: HttpRequest, exc: DomainError):
    status = error_status(type(exc))
    if status is None:  # a kind nobody gave a status: a bug, answered like any unexpected exception
        return unexpected(request, exc)
    errors = [{"field": exc.field, "message": exc.detail}] if isinstance(exc, InvalidInput) else None
    response = _answer(request, status, exc.code, exc.detail, errors=errors)
    if isinstance(exc, RateLimited):
        response["Retry-After"] = str(exc.retry_after)
    return response


def _field(location: tuple[Any, ...]) -> str | None:
    """A Pydantic error location as the client named the field: ("body", "payload", "text") → "text",
    ("query", "limit") → "limit"; None for the body as a whole."""
    kind, *rest = location or ("",)
    if kind == "body":
        rest = rest[1:]  # the view's parameter name, which the client never sees
    return ".".join(str(part) for part in rest) or None


@api.exception_handler(ValidationError)
def invalid_input(request: HttpRequest, exc: ValidationError):
    # Only where and why: pydantic's `input` would echo the whole bad value back, and its `ctx` may
    # hold an exception object, which is not JSON.
    errors = [
        {"field": _field(tuple(error.get("loc", ()))), "message": error.get("msg", "").removeprefix("Value error, ")}
        for error in exc.errors
    ]
    code = next((error["type"] for error in exc.errors if error.get("type") in _CODE_ERROR_TYPES), "invalid_field")
    detail = "; ".join(
        f"{error['field']}: {error['message']}" if error["field"] else error["message"] for error in errors
    )
    return _answer(request, 422, code, detail or "Invalid input.", errors=errors)


@api.exception_handler(AuthenticationError)
def not_authenticated(request: HttpRequest, exc: AuthenticationError):
    detail = getattr(request, CREDENTIALS_PROBLEM, "Authentication credentials were not provided.")
    response = _answer(request, 401, "not_authenticated", detail)
    response["WWW-Authenticate"] = 'Bearer realm="buddy"'
    return response


@api.exception_handler(RequestDataTooBig)
def too_large(request: HttpRequest, exc: RequestDataTooBig):
    return _answer(request, 413, "too_large", request_too_large_detail())


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404):
    return _answer(request, 404, "not_found", "Not found.")


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError):
    """What ninja itself refuses: a body it cannot parse (400 there; every invalid input is a 422 here)
    and a session cookie without its CSRF token (403)."""
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        detail = "The request body is not valid JSON."
        return _answer(request, 422, "invalid_json", detail, errors=[{"field": None, "message": detail}])
    if exc.status_code == 403:
        return _answer(request, 403, "csrf_failed", "The CSRF token is missing or wrong (session cookie).")
    return unexpected(request, exc)


class MethodNotAllowed(Exception):
    def __init__(self, allowed: tuple[str, ...]) -> None:
        super().__init__(", ".join(allowed))
        self.allowed = allowed


@api.exception_handler(MethodNotAllowed)
def method_not_allowed(request: HttpRequest, exc: MethodNotAllowed):
    response = _answer(request, 405, "method_not_allowed", f"{request.path} answers {' and '.join(exc.allowed)} only.")
    response["Allow"] = ", ".join(exc.allowed)
    return response


@api.exception_handler(Exception)
def unexpected(request: HttpRequest, exc: Exception):
    request_logger.error("Internal Server Error: %s", request.path, exc_info=exc, extra={"request": request})
    return _answer(request, 500, "internal_error", "Something went wrong on the server; what was saved stays.")


# Every method an endpoint does not answer: a 405 that lists what it does (`Allow`), after the same
# authentication as its own methods (no credentials is a 401 whatever the method). Without this, ninja
# answers 405 in plain text before authenticating.
OTHER_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")


def _refuser(allowed: tuple[str, ...]) -> Callable[[HttpRequest], None]:
    def refuse(request: HttpRequest) -> None:  # no parameter besides the request: ninja reads none
        raise MethodNotAllowed(allowed)

    return refuse


def other_methods_refused(router: Router) -> Router:
    for path, path_view in list(router.path_operations.items()):
        allowed = tuple(sorted({method for operation in path_view.operations for method in operation.methods}))
        others = [method for method in OTHER_METHODS if method not in allowed]
        router.add_api_operation(path, others, _refuser(allowed), include_in_schema=False)
    return router


for _router in (agent_router, chats_router, conversations_router, memory_router, notes_router, web_router):
    api.add_router("", other_methods_refused(_router))
