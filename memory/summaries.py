"""Rolling summaries: everything before the window start, folded in by the summary model.

Summarise ahead: the messages the NEXT window step is sure to drop (those before the turn start the
window would move to if it stepped now) are folded in as the window approaches its step, so the step
and the new summary reach the model together and the prompt cache breaks once. If the summary is late,
the window still moves (the budget is hard) and the summary catches up.

Runs on the task engine (django-q2), never on a reply's path; one job per session at a time (a lease
on the session row); a failed model call is retried with backoff; a worker killed mid-way leaves no
partial state — each summary records the last message it covers and the next job starts after it.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from conversations.content import estimate_tokens
from conversations.leases import lease_release, lease_take
from conversations.llm import ModelError, model_client
from conversations.models import Message, ModelCall, Session
from conversations.services import model_call_record
from conversations.window import window_next_step
from memory.models import Summary
from memory.selectors import summary_latest
from memory.tools import message_line

logger = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)
MAX_ATTEMPTS = 5
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


def summary_schedule(*, session: Session) -> None:
    """Queue a summary job if one is due (called after each turn; cheap when nothing is due)."""
    from django_q.tasks import async_task

    if summary_is_due(session=session):
        async_task("memory.summaries.summary_update", session.pk, group="summaries")


def _lease_take(session_id: int) -> bool:
    return lease_take(Session.objects.filter(pk=session_id), field="summary_lease_expires_at", ttl=LEASE)


def _lease_release(session_id: int) -> None:
    lease_release(Session.objects.filter(pk=session_id), field="summary_lease_expires_at")


def summary_update(session_id: int, attempt: int = 1) -> str:
    """The task: fold every message up to the target into the summary. Safe to run twice."""
    if not settings.BUDDY_SUMMARIES:
        return "disabled"
    if not _lease_take(session_id):
        return "busy"  # the running job re-checks the target before it stops
    try:
        session = Session.objects.select_related("agent", "user").get(pk=session_id)
        while True:
            target = summary_target_id(session=session)
            latest = summary_latest(session=session)
            through = latest.through_message_id if latest else 0
            if target <= through:
                return "up to date"
            _fold(session, latest, through, target)
    except ModelError as exc:
        if attempt >= MAX_ATTEMPTS:
            logger.error("summary of session %s failed %s times: %s", session_id, attempt, exc)
            return "failed"
        _retry_later(session_id, attempt)
        return "retrying"
    finally:
        _lease_release(session_id)


def _fold(session: Session, latest: Summary | None, through: int, target: int) -> Summary:
    lines, last_id, budget = [], through, CHUNK_TOKENS
    rows = (
        Message.objects.filter(session=session, id__gt=through, id__lte=target)
        .order_by("id")
        .values_list("id", "role", "created_at", "search_text")
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
    started = time.monotonic()
    model = settings.BUDDY_SUMMARY_MODEL
    try:
        reply = model_client().complete(
            model=model,
            system=SUMMARY_SYSTEM.format(tokens=settings.BUDDY_SUMMARY_TOKENS),
            prompt=prompt,
            max_tokens=settings.BUDDY_SUMMARY_TOKENS,
        )
    except ModelError as exc:
        _record(session, model, None, started, error=str(exc))
        raise
    _record(session, model, reply, started)
    text = "\n".join(b.get("text", "") for b in reply.content if b.get("type") == "text").strip()
    # The summary may never exceed its budget in the prompt, whatever the model wrote.
    text = text[: settings.BUDDY_SUMMARY_TOKENS * 4] or previous
    summary, _ = Summary.objects.get_or_create(
        session=session, through_message_id=last_id, defaults={"text": text, "tokens": estimate_tokens(text)}
    )
    return summary


def _record(session: Session, model: str, reply, started: float, error: str = "") -> None:
    model_call_record(
        session=session, kind=ModelCall.Kind.SUMMARY, model=model, reply=reply, started=started, error=error
    )


def _retry_later(session_id: int, attempt: int) -> None:
    """django-q2 acknowledges failed tasks; retries with backoff are a one-off schedule of our own."""
    from django_q.models import Schedule

    Schedule.objects.create(
        name=f"summary retry {session_id} #{attempt + 1} {timezone.now():%H%M%S%f}",
        func="memory.summaries.summary_update",
        args=f"{session_id},{attempt + 1}",
        schedule_type=Schedule.ONCE,
        repeats=1,
        next_run=timezone.now() + timedelta(seconds=30 * 2 ** (attempt - 1)),
    )
