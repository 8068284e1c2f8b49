"""The API's shared schemas: the chat a request names, the text rules as the OpenAPI schema states them,
and the one error body."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from ninja.schema import DjangoGetter
from pydantic import AfterValidator, BaseModel, model_validator
from pydantic_core import PydanticCustomError

from conversations.content import SNIPPET_MAX_CHARS, TITLE_MAX_CHARS, blank_problem, text_problem, title_problem
from conversations.refs import AgentParam, ChatIdParam, ChatRef

# JSON Schema patterns (ECMA-262 syntax) for what the validators below check in Python: a schema that
# allows no more than the server accepts (tests/test_api_schema.py). A lone surrogate cannot be sent
# in valid JSON text at all, so only NUL needs saying.
NO_NUL_PATTERN = "^[^\\u0000]*$"
NOT_BLANK_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
_BIDI = "\\u202A-\\u202E\\u2066-\\u2069"
TITLE_PATTERN = f"^[^\\u0000{_BIDI}]*[^\\s\\u0000{_BIDI}][^\\u0000{_BIDI}]*$"


def _not_blank(value: str) -> str:
    problem = text_problem(value) or blank_problem(value)
    if problem:
        raise PydanticCustomError("invalid_text", "the text {problem}", {"problem": problem})
    return value


def _title(value: str) -> str:
    problem = title_problem(value)
    if problem:
        raise PydanticCustomError("invalid_title", "a title {problem}", {"problem": problem})
    return value


# Text that must say something (a prompt): not empty, not only spaces, no NUL and no lone surrogate,
# which no backend stores (422 everywhere).
NotBlankText = Annotated[
    str, AfterValidator(_not_blank), Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK_PATTERN})
]
TitleText = Annotated[
    str,
    AfterValidator(_title),
    Field(
        min_length=1,
        max_length=TITLE_MAX_CHARS,
        description=f"1–{TITLE_MAX_CHARS} characters, not only spaces; no bidirectional override or isolate "
        "characters (U+202A–U+202E, U+2066–U+2069).",
        json_schema_extra={"pattern": TITLE_PATTERN},
    ),
]


class ObjectIn(Schema):
    """An input that must be a JSON object. Without this, ninja reads fields of any value as attributes:
    the body `"abc"` passed as `{"title": "Abc"}` (str.title() called)."""

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        given = value._obj if isinstance(value, DjangoGetter) else value
        if not isinstance(given, Mapping | BaseModel):
            raise PydanticCustomError("dict_type", "The body must be a JSON object.")
        return value


class ChatIn(ObjectIn):
    """The chat a request names (README: Conversations); both halves default."""

    agent: AgentParam | None = None
    chat_id: ChatIdParam | None = None

    @property
    def chat(self) -> ChatRef:
        return ChatRef.of(agent=self.agent, chat_id=self.chat_id)


class AgentOut(Schema):
    id: str
    name: str
    avatar: str


class ChatOut(Schema):
    agent: str
    chat_id: str
    title: str = Field("", description="The start of the chat's first prompt, or the name the user gave it.")
    last_message_at: datetime | None
    messages: int


class ChatRenameIn(ChatIn):
    title: TitleText = Field(..., description="The chat's new name.")


class PromptIn(ChatIn):
    text: NotBlankText = Field(..., description="What the user says: not empty, not only spaces.")


class PromptOut(Schema):
    reply: str
    message_id: int | None
    agent: str
    chat_id: str


# Every code an HTTP error body may carry, and its status (README: HTTP API, "Errors"); buddy/api.py
# chooses the status, tests/test_api_errors.py holds this list to what it answers.
ErrorCode = Literal[
    "not_authenticated",  # 401
    "csrf_failed",  # 403
    "not_found",  # 404
    "method_not_allowed",  # 405
    "conflict",  # 409
    "turn_running",  # 409
    "too_large",  # 413
    "invalid_field",  # 422
    "invalid_chat_id",  # 422
    "invalid_agent",  # 422
    "invalid_json",  # 422
    "invalid_idempotency_key",  # 422
    "rate_limited",  # 429
    "internal_error",  # 500
    "model_failed",  # 502
]


class FieldErrorOut(Schema):
    field: str | None = Field(
        description="The field as the client sent it (`text`, `chat_id`, `limit`, `Idempotency-Key` …); "
        "null when the problem is the request as a whole (e.g. a body that is not an object)."
    )
    message: str


class ErrorOut(Schema):
    """Every error answer of the API."""

    code: ErrorCode = Field(description="A stable machine code: what went wrong (README, HTTP API).")
    detail: str = Field(description="Why, as a sentence for a person.")
    errors: list[FieldErrorOut] | None = Field(
        None, description="Invalid input (422) only: one item per problem, naming the field."
    )


class SourceOut(Schema):
    id: int
    agent: str
    chat_id: str
    role: str
    created_at: datetime
    snippet: str = Field(
        description="What the message said, as one line of plain text (not HTML), cut at a word with "
        f"“…” past {SNIPPET_MAX_CHARS} characters."
    )


class HistoryMessageOut(Schema):
    id: int
    role: str
    content: list[dict[str, Any]]
    created_at: datetime
    kind: str | None = Field(
        None, description="What started the turn, on a turn's first message: `typed`, `confirmation` or `scheduled`."
    )
    sources: list[SourceOut] = Field(
        default_factory=list,
        description="On a reply: the archived messages the turn's memory tools drew on, for links to them.",
    )


class HistoryOut(Schema):
    messages: list[HistoryMessageOut]
    next_before: int | None
