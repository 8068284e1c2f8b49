"""How long the provider should keep each cached prefix of a model call (`BUDDY_CACHE_TTL`).

The provider keeps a cached prefix for 5 minutes after its last hit, or for 1 hour when it was
written with the 1-hour lifetime. Writing costs 1.25× the base input price (5 minutes) or 2× (1 hour);
reading costs 0.1× whatever the lifetime, and a write is billed only from the longest prefix read.
While a person answers within 5 minutes the short lifetime is the cheaper one; after a longer pause
the next call writes its whole prefix again — up to the full window. `5m` and `1h` put one lifetime
on every breakpoint; `auto` (the default, chosen by `bench/cost.py --pacing`, docs/benchmarks.md):

- **An anchor at 1 hour** on the tools, the system prompt and the message before the newest one (what
  the model said last). After any pause under an hour the next call reads everything up to there:
  the 1-hour writes are mostly what the model said last, never the window again.
- **The tail at 5 minutes**: the newest user message (a prompt or tool results) — unless the chat's own
  recent pauses say the next call will likely come more than 5 minutes later (then every breakpoint
  is 1 hour).
- **A prefix rewritten anyway at 5 minutes**: when the window stepped, the summary changed or the
  chat was idle for over an hour, the whole prefix is new. Written at 5 minutes (likely next call
  within 5 minutes), the next call reads it and anchors it at 1 hour for the price of its new
  tokens only.

Both choices compare writing at 5 minutes now — 1.25, plus 2 again with the chance `p` that the next
call comes after the entry expired — with writing at 1 hour, 2: 5 minutes is cheaper while
`p < (2 − 1.25) / 2 = 0.375`. `p` is estimated from the chat's last turns (Laplace's rule of
succession, so a new chat starts at 1/2: 1 hour).

Longer lifetimes come first in the request, as the provider requires, and there are never more than
4 breakpoints (tools, system prompt, the message before the newest, tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

from django.conf import settings
from django.db.models import Subquery
from django.utils import timezone

from conversations.models import INPUT_PRICE, Message, ModelCall, Session
from conversations.prepared import PreparedQuery
from conversations.window import RecentMessages

FIVE_MINUTES = "5m"
ONE_HOUR = "1h"
SHORT_LIFETIME = timedelta(minutes=5)
LONG_LIFETIME = timedelta(hours=1)
WRITE_PRICE = {
    FIVE_MINUTES: INPUT_PRICE["cache_creation_5m_input_tokens"],
    ONE_HOUR: INPUT_PRICE["cache_creation_1h_input_tokens"],
}
# Above this chance of a long pause before the next call, a 1-hour write is the cheaper one.
LONG_PAUSE_BREAK_EVEN = (WRITE_PRICE[ONE_HOUR] - WRITE_PRICE[FIVE_MINUTES]) / WRITE_PRICE[ONE_HOUR]
RECENT_TURNS = 20
RECENT_MESSAGES = 3 * RECENT_TURNS  # enough rows to hold that many turn starts in a chat with tool calls


@dataclass(frozen=True)
class CacheLifetimes:
    """The lifetime of each breakpoint of one request, in request order; `history` is the message before
    the newest one (None: no breakpoint there)."""

    tools: str
    system: str
    history: str | None
    tail: str

    @staticmethod
    def control(ttl: str) -> dict[str, str]:
        return {"type": "ephemeral", "ttl": ttl}


def cache_lifetimes(
    *,
    session: Session,
    window_moved: bool,
    summary_at: datetime | None,
    now: datetime | None = None,
    recent: RecentMessages | None = None,
) -> CacheLifetimes:
    """The breakpoints' lifetimes for the call about to be made (`BUDDY_CACHE_TTL`).

    `window_moved`: the window's start moved for this call; `summary_at`: when the summary in the
    system prompt was written (None: no summary); `recent`: the rows the call's window was read from.
    """
    policy = settings.BUDDY_CACHE_TTL
    if policy in (FIVE_MINUTES, ONE_HOUR):
        return CacheLifetimes(tools=policy, system=policy, history=None, tail=policy)
    now = now or timezone.now()
    pace = chat_pace(session=session, recent=recent)
    if long_pause_share(session=session, pace=pace) >= LONG_PAUSE_BREAK_EVEN:
        return CacheLifetimes(tools=ONE_HOUR, system=ONE_HOUR, history=None, tail=ONE_HOUR)
    if prefix_rewritten(session=session, window_moved=window_moved, summary_at=summary_at, now=now, pace=pace):
        return CacheLifetimes(tools=ONE_HOUR, system=FIVE_MINUTES, history=None, tail=FIVE_MINUTES)
    return CacheLifetimes(tools=ONE_HOUR, system=ONE_HOUR, history=ONE_HOUR, tail=FIVE_MINUTES)


@dataclass(frozen=True)
class ChatPace:
    """What the policy reads of a chat: its newest messages' (created_at, is_turn_start), oldest first,
    and when its previous chat call was made (None: never)."""

    messages: list[tuple[datetime, bool]]
    previous_call_at: datetime | None


def _previous_call(session_id: int):
    return (
        ModelCall.objects.filter(session_id=session_id, kind=ModelCall.Kind.CHAT)
        .order_by("-created_at")
        .values("created_at")[:1]
    )


# The previous call's time, read on every model call whose window holds the chat's newest messages.
_PREVIOUS_CALL_AT = PreparedQuery(
    lambda session_id: _previous_call(session_id).values_list("created_at", flat=True), session_id=int
)


def chat_pace(*, session: Session, recent: RecentMessages | None = None) -> ChatPace:
    """The chat's pace in one query. When the rows a window was just read from (`recent`) hold the
    newest messages, they are taken and only the previous call's time is read; otherwise that time
    rides along each message row read here."""
    newest = recent.newest(RECENT_MESSAGES) if recent is not None else None
    if newest is not None:
        found = _PREVIOUS_CALL_AT.rows(session_id=session.pk)
        return ChatPace(messages=newest, previous_call_at=found[0] if found else None)
    previous_call = _previous_call(session.pk)
    rows = list(
        Message.objects.filter(session=session)
        .order_by("-id")
        .annotate(previous_call_at=Subquery(previous_call))
        .values_list("created_at", "is_turn_start", "previous_call_at")[:RECENT_MESSAGES]
    )
    if not rows:
        return ChatPace(messages=[], previous_call_at=previous_call.values_list("created_at", flat=True).first())
    return ChatPace(messages=[(at, turn_start) for at, turn_start, _ in reversed(rows)], previous_call_at=rows[0][2])


def long_pause_share(*, session: Session, pace: ChatPace | None = None) -> float:
    """The estimated chance that the next turn starts more than 5 minutes after the one before ended:
    (long pauses + 1) / (pauses + 2) over the chat's last `RECENT_TURNS` turn starts."""
    rows = (pace or chat_pace(session=session)).messages
    pauses = [later - earlier for (earlier, _), (later, turn_start) in pairwise(rows) if turn_start]
    pauses = pauses[-RECENT_TURNS:]
    long_pauses = sum(1 for pause in pauses if pause > SHORT_LIFETIME)
    return (long_pauses + 1) / (len(pauses) + 2)


def prefix_rewritten(
    *, session: Session, window_moved: bool, summary_at: datetime | None, now: datetime, pace: ChatPace | None = None
) -> bool:
    """Whether this call's prefix after the tools is certainly not in the cache: the window stepped,
    the summary changed since the previous call, or no call came for longer than the long lifetime."""
    if window_moved:
        return True
    previous_call_at = (pace or chat_pace(session=session)).previous_call_at
    if previous_call_at is None or now - previous_call_at > LONG_LIFETIME:
        return True
    return summary_at is not None and summary_at > previous_call_at
