from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from conversations.content import CHAT_ID_RE


class SearchIn(Schema):
    q: str = Field("", description="A natural-language query; any text is accepted.")
    chat_id: str | None = Field(None, pattern=CHAT_ID_RE.pattern.replace("{1,64}", "{0,64}"))
    agent: str | None = Field(None, max_length=64)
    limit: int = Field(5, ge=1, le=50)


class SearchResultOut(Schema):
    id: int
    role: str
    created_at: datetime
    snippet: str = Field(description="Plain text; the matched words are between [ and ].")
    score: float = Field(description="Higher is better.")


class SearchOut(Schema):
    results: list[SearchResultOut]


class ErrorOut(Schema):
    detail: str
