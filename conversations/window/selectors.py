"""Reading the window: the rows it needs (one indexed query) and the window as it would be sent."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import BooleanField, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from conversations.models import Message, Session
from conversations.prepared import PreparedQuery
from conversations.window.plan import Limits, Plan, Row, effective_start_id, plan_window
from conversations.window.rendered import rendered_rows
from conversations.window.types import RecentMessages, Window, WindowStep


def window_limits() -> Limits:
    """The window's settings, read on every call (tests and deployments change them)."""
    try:
        return Limits(
            budget=settings.BUDDY_CONTEXT_TOKENS,
            rows=settings.BUDDY_WINDOW_ROWS,
            low_water=settings.BUDDY_WINDOW_LOW_WATER,
            block_cap=settings.BUDDY_MAX_PROMPT_TOKENS,
        )
    except ValueError as error:
        raise ImproperlyConfigured(str(error)) from error


def session_messages_since(*, session_id: int, since: int) -> QuerySet[Message]:
    """The session's messages with id >= since; ordered by (session, id) the (session, id) indexes serve it.

    On PostgreSQL the session is matched with `= ANY(ARRAY[id])`, not `=`: the planner folds an equality
    out of the ORDER BY, and `ORDER BY id LIMIT n` then lets it bet on walking the primary key and
    meeting the session's rows early — a bet lost badly when they are old or all at the end of a large
    archive. A row comparison `(session_id, id) >= (…)` avoids the bet too, but bounds a backward btree
    scan on its first column only, so the scan runs on through the whole session. SQLite's planner needs
    no help. The window's build time at each archive size is in docs/benchmarks.md."""
    if connection.vendor != "postgresql":
        return Message.objects.filter(session_id=session_id, id__gte=since)
    column = f"{connection.ops.quote_name(Message._meta.db_table)}.{connection.ops.quote_name('session_id')}"
    in_session = RawSQL(f"{column} = ANY(%s)", ([session_id],), output_field=BooleanField())
    return Message.objects.filter(in_session, id__gte=since)


def window_rows_query(*, session_id: int, stored_start: int, limit: int):
    """The newest `limit` messages with id >= stored_start, newest first: one range scan of the
    (session, id) index. The content comes as JSON text, to be decoded only for the rows the window
    looks at, and so does the time (for the few rows whose time is asked for: `RecentMessages`)."""
    return (
        session_messages_since(session_id=session_id, since=stored_start)
        .order_by("-session_id", "-id")
        .annotate(raw=Cast("content", output_field=TextField()), created=Cast("created_at", output_field=TextField()))
        .values_list("id", "role", "tokens", "is_turn_start", "largest_block_tokens", "raw", "created")[:limit]
    )


# window_rows_query prepared (conversations.prepared), one per row limit: the limit is in the SQL.
_WINDOW_ROWS: dict[int, PreparedQuery] = {}


def _window_rows_prepared(limit: int) -> PreparedQuery:
    prepared = _WINDOW_ROWS.get(limit)
    if prepared is None:
        if len(_WINDOW_ROWS) >= 16:  # the limit comes from settings: a handful of values at most
            _WINDOW_ROWS.clear()
        prepared = _WINDOW_ROWS[limit] = PreparedQuery(
            lambda session_id, stored_start: window_rows_query(
                session_id=session_id, stored_start=stored_start, limit=limit
            ),
            session_id=int,
            stored_start=int,
        )
    return prepared


def window_rows(*, session_id: int, stored_start: int, limit: int) -> tuple[list[Row], bool]:
    """`window_rows_query` as Rows, oldest first, and whether they are all rows since the stored start."""
    values = _window_rows_prepared(limit).rows(session_id=session_id, stored_start=stored_start)
    rows = [
        Row(message_id, role, tokens, turn_start, largest, raw=raw, created=created)
        for message_id, role, tokens, turn_start, largest, raw, created in values
    ]
    rows.reverse()
    return rows, len(rows) < limit


def window_stored_start(*, session: Session) -> int:
    """The stored start as the database holds it now (another process may have moved it)."""
    stored = Session.objects.filter(pk=session.pk).values_list("window_start_id", flat=True).first()
    return session.window_start_id if stored is None else stored


def window_effective_start(*, session_id: int, stored_start: int, rows: list[Row], complete: bool) -> int | None:
    """The id of the row the stored start puts the window at (`plan.effective_start_id`).

    With every row since the stored start at hand this is pure. Otherwise (more rows since the stored
    start than the window may hold: a step is due) it is looked up: the stored row when it is a user
    message, else the first turn start after it — the partial turn-start index answers that at once.
    That matters when the stored start is 0 (no step yet) and the archive opens with rows that are no
    turn start: the first turn start may then still lie among the rows at hand.
    """
    if complete:
        return effective_start_id(rows, stored_start)
    if stored_start and Message.objects.filter(session_id=session_id, id=stored_start, role=Message.Role.USER).exists():
        return stored_start
    turn_starts = session_messages_since(session_id=session_id, since=stored_start).filter(is_turn_start=True)
    return turn_starts.order_by("session_id", "id").values_list("id", flat=True).first()


def window_compute(*, session: Session, stored_start: int, limits: Limits) -> Window:
    """The window from `stored_start`, moving it as the step rule says, without writing anything."""
    # One more row than the cap: when it comes back, there are more rows since the stored start than
    # the window may hold.
    rows, complete = window_rows(session_id=session.pk, stored_start=stored_start, limit=limits.rows + 1)
    effective = window_effective_start(session_id=session.pk, stored_start=stored_start, rows=rows, complete=complete)
    plan = plan_window(rows, effective_start_id=effective, limits=limits, shared=rendered_rows)
    # With the stored start at 0, every row since it is every message of the chat.
    return window_from_plan(plan, rows, stored_start, whole_chat=complete and stored_start == 0)


def window_from_plan(plan: Plan, rows: list[Row], stored_start: int, *, whole_chat: bool = False) -> Window:
    """The Window of a plan over `rows` (pure; the stored start is reported, not written). `whole_chat`:
    the rows are every message of the chat."""
    start_id = rows[plan.start].id if plan.start is not None else None
    return Window(
        messages=plan.messages,
        message_ids=plan.message_ids,
        start_id=start_id,
        tokens=plan.tokens,
        rows=len(rows) - plan.start if plan.start is not None else 0,
        mode=plan.mode,
        stored_start_id=stored_start,
        moved=plan.moved,
        next_start_id=rows[plan.next_start].id if plan.next_start is not None else None,
        recent=RecentMessages(rows, whole_chat),
    )


def window_preview(*, session: Session) -> Window:
    """The window a model call would get now (for stats and previews); never moves the stored start."""
    return window_compute(session=session, stored_start=window_stored_start(session=session), limits=window_limits())


def window_next_step(*, session: Session) -> WindowStep:
    """For the summariser: the turn start the next step would move the window to if it were due now
    (None: no turn start would do), and how many tokens and messages the window can still take before
    the step is due. Everything before `next_start_id` leaves the window at the next step, so it can be
    summarised ahead of time."""
    limits = window_limits()
    window = window_compute(session=session, stored_start=window_stored_start(session=session), limits=limits)
    return WindowStep(
        start_id=window.start_id,
        next_start_id=window.next_start_id,
        tokens_until_step=max(limits.budget - window.tokens, 0),
        rows_until_step=max(limits.rows - len(window.messages), 0),
    )
