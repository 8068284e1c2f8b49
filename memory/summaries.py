"""Rolling summaries: everything before the window start, folded in by the summary model.

Summarise ahead: the messages the NEXT window step is sure to drop (those before the turn start the
window would move to if it stepped now) are folded in as the window approaches its step, so the step
and the new summary reach the model together and the prompt cache breaks once. If the summary is late,
the window still moves (the budget is hard) and the summary catches up.

Memory decides when a summary is due, what it covers and what is kept; the model that writes it is
handed in (`summarise`) by the agent's summary task (agent/tasks.py), which owns the model clients,
records each call and retries a failed one with backoff. The job runs on the task engine (django-q2),
never on a reply's path; one job per session at a time (a SummaryLease); a worker killed mid-way
leaves no partial state — each summary records the last message it covers and the next job starts
after it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from django.conf import settings

from conversations.content import estimate_tokens
from conversations.leases import lease_row_take
from conversations.models import Message, Session
from conversations.window import window_next_step
from memory.models import Summary, SummaryLease
from memory.selectors import MESSAGE_TEXT, summary_latest
from memory.tools import message_line

LEASE = timedelta(minutes=5)
# Summarise ahead once the window is within this share of the budget of its next step.
AHEAD_SHARE = 0.15
# At most this many tokens of transcript per summary call; longer gaps are folded in several calls.
CHUNK_TOKENS = 30_000

SUMMARY_SYSTEM = (
    "You maintain the long-term memory of a conversation between a user and an assistant. Fold the new "
    "messages into the previous summary. Keep names, facts about the user, decisions, preferences, "
    "commitments, open questions and dates (write dates as YYYY-MM-DD). Drop small talk. Write plain "
    "prose or terse bullet points, never more than {tokens} tokens."
)


def summary_target_id(*, session: Session) -> int:
    """The id of the last message the summary should cover now (0: nothing to do)."""
    session.refresh_from_db(fields=["window_start_id"])
    covered_by_window_start = _last_id_before(session, session.window_start_id)
    step = window_next_step(session=session)
    near = (
        step.tokens_until_step <= AHEAD_SHARE * settings.BUDDY_CONTEXT_TOKENS
        or step.rows_until_step <= AHEAD_SHARE * settings.BUDDY_WINDOW_ROWS
    )
    if step.next_start_id and near:
        return max(covered_by_window_start, _last_id_before(session, step.next_start_id))
    return covered_by_window_start


def _last_id_before(session: Session, message_id: int) -> int:
    if not message_id:
        return 0
    row = (
        Message.objects.filter(session=session, id__lt=message_id).order_by("-id").values_list("id", flat=True).first()
    )
    return row or 0


def summary_is_due(*, session: Session) -> bool:
    if not settings.BUDDY_SUMMARIES:
        return False
    latest = summary_latest(session=session)
    return summary_target_id(session=session) > (latest.through_message_id if latest else 0)


class Summarise(Protocol):
    """The summary model: the text it writes for `prompt` under `system`, in at most `max_tokens`
    tokens. When the model fails it raises, and `summary_update` lets that exception through."""

    def __call__(self, *, session: Session, system: str, prompt: str, max_tokens: int) -> str: ...


def summary_update(*, session_id: int, summarise: Summarise) -> str:
    """Fold every message up to the target into the summary, one chunk per `summarise` call: "up to
    date" when done, "busy" when another job holds the session's lease, "disabled" when summaries are
    off. Safe to run twice. What `summarise` raises propagates, with the lease released and every
    summary written before it kept."""
    if not settings.BUDDY_SUMMARIES:
        return "disabled"
    if not lease_row_take(SummaryLease, ttl=LEASE, session_id=session_id):
        return "busy"  # the running job re-checks the target before it stops
    try:
        session = Session.objects.select_related("agent", "user").get(pk=session_id)
        while True:
            target = summary_target_id(session=session)
            latest = summary_latest(session=session)
            through = latest.through_message_id if latest else 0
            if target <= through:
                return "up to date"
            _fold(session, latest, through, target, summarise)
    finally:
        SummaryLease.objects.filter(session_id=session_id).delete()


def _fold(session: Session, latest: Summary | None, through: int, target: int, summarise: Summarise) -> Summary:
    lines, last_id, budget = [], through, CHUNK_TOKENS
    rows = (
        Message.objects.filter(session=session, id__gt=through, id__lte=target)
        .order_by("id")
        .annotate(text=MESSAGE_TEXT)
        .values_list("id", "role", "created_at", "text")
    )
    for message_id, role, created_at, text in rows.iterator(chunk_size=500):
        line = message_line(message_id, role, created_at, text)
        budget -= estimate_tokens(line)
        if lines and budget < 0:
            break
        lines.append(line)
        last_id = message_id
    previous = latest.text if latest else "(none yet)"
    prompt = f"Previous summary:\n{previous}\n\nNew messages:\n" + "\n".join(lines) + "\n\nThe new summary:"
    text = summarise(
        session=session,
        system=SUMMARY_SYSTEM.format(tokens=settings.BUDDY_SUMMARY_TOKENS),
        prompt=prompt,
        max_tokens=settings.BUDDY_SUMMARY_TOKENS,
    ).strip()
    # The summary may never exceed its budget in the prompt, whatever the model wrote.
    text = text[: settings.BUDDY_SUMMARY_TOKENS * 4] or previous
    summary, _ = Summary.objects.get_or_create(
        session=session, through_message_id=last_id, defaults={"text": text, "tokens": estimate_tokens(text)}
    )
    return summary
