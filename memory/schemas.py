from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from conversations.refs import AgentParam
from conversations.schemas import ChatIn, NotBlankText, ObjectIn


class SearchIn(ChatIn):
    q: str = Field(..., min_length=1, description="A natural-language query; any non-empty text is accepted.")
    limit: int = Field(5, ge=1, le=50)


class SearchResultOut(Schema):
    id: int
    role: str
    created_at: datetime
    snippet: str = Field(
        description="The text as it is; the matched words are between [ and ]; a [, ] or \\ of the text is escaped "
        "with a backslash."
    )
    score: float = Field(description="Higher is better.")


class SearchOut(Schema):
    results: list[SearchResultOut]


# A question, not a document: longer text is refused rather than cut (its terms beyond the first 32
# are dropped anyway, memory.search.text).
ACROSS_QUERY_MAX_CHARS = 1000


class AllChatsSearchIn(ObjectIn):
    q: NotBlankText = Field(
        ...,
        max_length=ACROSS_QUERY_MAX_CHARS,
        description=f"A natural-language query: 1–{ACROSS_QUERY_MAX_CHARS} characters, not only spaces.",
    )
    agent: AgentParam | None = Field(None, description="Only this agent's chats; absent or empty: every agent's.")
    limit: int = Field(20, ge=1, le=50)


class AllChatsResultOut(SearchResultOut):
    agent: str
    chat_id: str
    chat_title: str = Field(description="The chat's name: the start of its first prompt, or the one the user gave it.")


class AllChatsSearchOut(Schema):
    results: list[AllChatsResultOut]


class SummaryOut(Schema):
    through_message_id: int
    tokens: int
    created_at: datetime


class UsageOut(Schema):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int = Field(description="Read from the prompt cache (0.1× the input price, any lifetime).")
    cache_creation_input_tokens: int = Field(description="Written to the prompt cache: the two lifetimes below.")
    cache_creation_5m_input_tokens: int = Field(description="Written with the 5-minute lifetime (1.25×).")
    cache_creation_1h_input_tokens: int = Field(description="Written with the 1-hour lifetime (2×).")


class CostOut(Schema):
    amount: float = Field(description="US dollars: the calls whose model `BUDDY_PRICES` prices.")
    unpriced_calls: int = Field(description="Calls of a model `BUDDY_PRICES` does not price, left out of `amount`.")


class SearchIndexOut(Schema):
    messages: int
    indexed: int = Field(
        description="Messages search covers in full; equal to `messages` once background indexing is done."
    )


class StatsOut(Schema):
    total_messages: int
    total_tokens: int
    window_messages: int
    window_tokens: int
    archived_messages: int = Field(description="Messages before the window: total − window.")
    summary: SummaryOut | None
    canvas_elements: int
    first_message_at: datetime | None
    last_message_at: datetime | None
    usage: UsageOut = Field(description="Every model call of the chat, summaries included.")
    cost: CostOut | None = Field(description="What those calls cost in money; null when `BUDDY_PRICES` is not set.")
    search_index: SearchIndexOut
