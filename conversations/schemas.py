from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema


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
    title: str = Field(..., description="The chat's new name, 1–100 characters.")
    agent: str | None = Field(None, description="An agent's slug; default `buddy`.")
    chat_id: str | None = Field(None, description="The chat to rename; default `main`.")


class PromptIn(Schema):
    text: str = Field(..., description="What the user says.")
    agent: str | None = Field(None, description="An agent's slug; default `buddy`.")
    chat_id: str | None = Field(None, description="1–64 characters `[A-Za-z0-9_.:-]`; default `main`.")


class PromptOut(Schema):
    reply: str
    message_id: int | None
    agent: str
    chat_id: str


class ErrorOut(Schema):
    detail: Any


class HistoryMessageOut(Schema):
    id: int
    role: str
    content: list[dict[str, Any]]
    created_at: datetime
    kind: str | None = Field(
        None, description="What started the turn, on a turn's first message: `typed`, `confirmation` or `scheduled`."
    )


class HistoryOut(Schema):
    messages: list[HistoryMessageOut]
    next_before: int | None
