"""Refusals a client can act on, raised by the services and selectors of every app.

Each kind carries a stable `code`: the `code` of an HTTP error body and of a socket `error` frame
(README: HTTP API, WebSocket). A service never names an HTTP status: buddy/api.py alone gives each kind
its status (NotFound 404, InvalidInput 422, …), and the WebSocket consumer sends the code in a frame.
"""

from __future__ import annotations

from typing import ClassVar


class DomainError(Exception):
    """A refusal; `detail` is a sentence for a person."""

    code: ClassVar[str]

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(DomainError, LookupError):
    """No such thing for this user: missing and another user's are never told apart."""

    code = "not_found"


class Conflict(DomainError):
    """The request is well formed but clashes with what is stored (a limit reached, a name taken)."""

    code = "conflict"


class InvalidInput(DomainError, ValueError):
    """Input that breaks a rule. `field` names it as the client sent it (`text`, `chat_id`, …), None
    when the rule is about the request as a whole."""

    code = "invalid_field"

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.field = field
