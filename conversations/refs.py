"""ChatRef: which chat a request, a frame, a schedule or an import means — an agent's slug and a chat id
(README: Conversations). The chat-id and agent rules live here and nowhere else: every endpoint, the
socket handshake, the schedules and the import commands go through ChatRef, and the API schemas use
ChatIdParam / AgentParam, which check the same rules and say them in the OpenAPI schema."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from conversations.errors import InvalidInput

DEFAULT_AGENT = "buddy"
DEFAULT_CHAT_ID = "main"

CHAT_ID_MAX_CHARS = 64
CHAT_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
CHAT_ID_RE = re.compile(CHAT_ID_PATTERN)
CHAT_ID_RULE = "1–64 characters of A-Z a-z 0-9 _ . : -"
CHAT_ID_INVALID = f"chat_id must be {CHAT_ID_RULE}"

# An agent is named by its slug (Agent.slug, a SlugField of at most 64 characters).
AGENT_PATTERN = r"^[-A-Za-z0-9_]{1,64}$"
AGENT_RE = re.compile(AGENT_PATTERN)
AGENT_INVALID = "agent must be an agent's slug: 1–64 characters of A-Z a-z 0-9 _ -"


class InvalidChatId(InvalidInput):
    code = "invalid_chat_id"

    def __init__(self) -> None:
        super().__init__(CHAT_ID_INVALID, field="chat_id")


class InvalidAgent(InvalidInput):
    code = "invalid_agent"

    def __init__(self) -> None:
        super().__init__(AGENT_INVALID, field="agent")


@dataclass(frozen=True)
class ChatRef:
    """One of a user's chats by name. Always valid: constructing one with a bad value raises
    InvalidChatId or InvalidAgent. Whose chat it is, and whether it exists, is the reader's business
    (conversations.selectors.session_require)."""

    agent: str = DEFAULT_AGENT
    chat_id: str = DEFAULT_CHAT_ID

    def __post_init__(self) -> None:
        if not isinstance(self.chat_id, str) or not CHAT_ID_RE.fullmatch(self.chat_id):
            raise InvalidChatId()
        if not isinstance(self.agent, str) or not AGENT_RE.fullmatch(self.agent):
            raise InvalidAgent()

    @classmethod
    def of(cls, *, agent: str | None = None, chat_id: str | None = None) -> ChatRef:
        """The chat named by values as a client sends them: absent or empty means the default."""
        return cls(agent=agent or DEFAULT_AGENT, chat_id=chat_id or DEFAULT_CHAT_ID)

    def __str__(self) -> str:
        return f"{self.agent}/{self.chat_id}"


DEFAULT_CHAT = ChatRef()


def _chat_id_checked(value: str) -> str:
    if value and not CHAT_ID_RE.fullmatch(value):
        raise PydanticCustomError(InvalidChatId.code, CHAT_ID_INVALID)
    return value


def _agent_checked(value: str) -> str:
    if value and not AGENT_RE.fullmatch(value):
        raise PydanticCustomError(InvalidAgent.code, AGENT_INVALID)
    return value


# The two halves of a ChatRef as API fields and frame fields: empty means the default. A refusal's
# Pydantic error type is the code (invalid_chat_id, invalid_agent), which buddy/api.py answers with.
ChatIdParam = Annotated[
    str,
    AfterValidator(_chat_id_checked),
    Field(
        description=f"{CHAT_ID_RULE}; absent or empty: `{DEFAULT_CHAT_ID}`.",
        json_schema_extra={"pattern": CHAT_ID_PATTERN.replace("{1,", "{0,"), "maxLength": CHAT_ID_MAX_CHARS},
    ),
]
AgentParam = Annotated[
    str,
    AfterValidator(_agent_checked),
    Field(
        description=f"An agent's slug; absent or empty: `{DEFAULT_AGENT}`.",
        json_schema_extra={"pattern": AGENT_PATTERN.replace("{1,", "{0,"), "maxLength": 64},
    ),
]
