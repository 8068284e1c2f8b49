from __future__ import annotations

from datetime import datetime

from ninja import Schema


class AgentOut(Schema):
    id: str
    name: str
    avatar: str


class ChatOut(Schema):
    agent: str
    chat_id: str
    last_message_at: datetime | None
    messages: int
