from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import AfterValidator

from conversations.content import text_problem


def _plain_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(f"the text {problem}")
    return value


# Every string the API takes: a lone surrogate or a NUL is invalid input (422) on every backend.
PlainText = Annotated[str, AfterValidator(_plain_text)]


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


class ChatRenameIn(Schema):
    title: PlainText = Field(..., description="The chat's new name, 1–100 characters.")
    agent: PlainText | None = Field(None, description="An agent's slug; default `buddy`.")
    chat_id: PlainText | None = Field(None, description="The chat to rename; default `main`.")


class PromptIn(Schema):
    text: PlainText = Field(..., description="What the user says.")
    agent: PlainText | None = Field(None, description="An agent's slug; default `buddy`.")
    chat_id: PlainText | None = Field(None, description="1–64 characters `[A-Za-z0-9_.:-]`; default `main`.")


class PromptOut(Schema):
    reply: str
    message_id: int | None
    agent: str
    chat_id: str


class ErrorOut(Schema):
    """Every error answer of the API."""

    detail: Any = Field(
        ..., description="Why: a sentence, or for invalid input (422) a list of `{type, loc, msg}`, one per problem."
    )


class SourceOut(Schema):
    id: int
    agent: str
    chat_id: str
    role: str
    created_at: datetime


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
