"""One turn: archive the prompt, call the model, run its tools, archive every step, push frames.

A turn holds its session's lease (a row update with an expiry, never a transaction held across a
model call), so turns of one session never interleave, across processes; a heartbeat renews it while
the turn runs, so a crashed process cannot block a session for longer than BUDDY_TURN_LEASE_SECONDS.
The process also remembers which chats have a turn running here, so a socket refuses a prompt to one
of them without asking the database (turn_running_here). Every step is archived as it
happens; if the process dies anywhere, the window builder repairs what is missing in the window.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from agent.llm import ModelError, ModelReply, model_client
from agent.prompt import model_for, request_build
from agent.threads import after_answer, turn_slot_lent
from agent.tools import NOT_AN_OBJECT, tool_round_run
from conversations.bursts import Bursts
from conversations.connections import connection_lend_back
from conversations.content import (
    TOOL_USE_ID_RE,
    estimate_tokens,
    json_text_cleaned,
    text_of,
    text_problem,
    tool_result_text,
)
from conversations.errors import DomainError, InvalidInput
from conversations.leases import LeaseHeartbeat, lease_release, lease_renew, lease_take_returning
from conversations.models import Message, ModelCall, Session
from conversations.provenance import turn_sources
from conversations.services import message_append, messages_index, model_call_record, session_title_from_prompt
from conversations.window import Window, window_build
from memory.models import Summary
from memory.selectors import summary_latest
from memory.semantic import vectors_schedule
from memory.summaries import summary_is_due, summary_is_due_after_turn
from realtime.frames import (
    PROMPT_KINDS,
    AssistantMessageFrame,
    ErrorFrame,
    ToolResultFrame,
    ToolUseFrame,
    UserMessageFrame,
)
from realtime.push import DeltaStream, chats_changed_on_commit, push_frame, push_frame_on_commit

logger = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.5


class TurnError(DomainError):
    """A turn refused or failed. `code` names it in a socket's `error` frame (realtime.frames) and an
    HTTP error body; buddy/api.py gives each kind its HTTP status."""


class TurnRunning(TurnError):
    code = "turn_running"

    def __init__(self) -> None:
        super().__init__("A turn is already running in this chat; wait for it or cancel it.")


class PromptTooLarge(TurnError):
    code = "too_large"


class PromptInvalid(TurnError, InvalidInput):
    """The prompt (field `text` unless said otherwise) breaks a rule; nothing is archived."""

    def __init__(self, detail: str, *, field: str | None = "text") -> None:
        InvalidInput.__init__(self, detail, field=field)


class ModelFailed(TurnError):
    code = "model_failed"


@dataclass
class TurnResult:
    reply: str
    message_id: int | None  # the final assistant message, None when nothing was said
    prompt_id: int
    cancelled: bool = False
    used_tools: bool = True  # False only when this run archived the whole turn and called no tool
    last_call: _LastCall | None = None
    # Archived without their search documents, which turn_run writes once the reply is out.
    unindexed: list[Message] = field(default_factory=list)


def prompt_check(text: str) -> None:
    """Refuse a prompt before anything is archived (a refused prompt is not archived)."""
    if not isinstance(text, str) or not text.strip():
        raise PromptInvalid("The prompt is empty.")
    problem = text_problem(text)
    if problem:
        raise PromptInvalid(f"The prompt {problem}.")
    tokens = estimate_tokens([{"type": "text", "text": text}])
    if tokens > settings.BUDDY_MAX_PROMPT_TOKENS:
        raise PromptTooLarge(
            f"The prompt is about {tokens} tokens; the most one prompt may hold is {settings.BUDDY_MAX_PROMPT_TOKENS}."
        )


# --- The lease ----------------------------------------------------------------------------------


def _lease_ttl() -> timedelta:
    return timedelta(seconds=settings.BUDDY_TURN_LEASE_SECONDS)


LEASE_FIELD = "turn_lease_expires_at"


def turn_lease_acquire(*, session: Session, lease_id: str | None = None) -> str:
    """Take the session's turn lease (conversations.leases), or raise TurnRunning. The same statement
    reads the window's stored start into `session.window_start_id` (the turn's first window needs it).
    `lease_id`: the holder's id (at most 32 characters), a new one by default."""
    lease_id = lease_id or uuid.uuid4().hex
    taken = lease_take_returning(
        Session,
        pk=session.pk,
        field=LEASE_FIELD,
        ttl=_lease_ttl(),
        returning=("window_start_id",),
        holder="turn_lease_id",
        turn_lease_id=lease_id,
        turn_cancel_requested=False,
    )
    if taken is None:
        raise TurnRunning()
    session.window_start_id = taken[0]
    return lease_id


def turn_lease_renew(*, session: Session, lease_id: str) -> bool:
    """Extend the lease; returns whether the turn should go on (still ours, not cancelled, and its user
    not deactivated meanwhile)."""
    rows = Session.objects.filter(
        pk=session.pk, turn_lease_id=lease_id, turn_cancel_requested=False, user__is_active=True
    )
    return lease_renew(rows, field=LEASE_FIELD, ttl=_lease_ttl())


def turn_lease_release(*, session: Session, lease_id: str) -> None:
    _turn_here_end(lease_id)
    rows = Session.objects.filter(pk=session.pk, turn_lease_id=lease_id)
    lease_release(rows, field=LEASE_FIELD, turn_lease_id="", turn_cancel_requested=False)


# The turns running in this process, by chat, each with its lease's heartbeat. Written only by the
# turn that holds the lease, between taking it (turn_lease_hold) and releasing it.
_turns_here: Counter[tuple[int, int, str]] = Counter()
_heartbeats: dict[str, tuple[tuple[int, int, str], LeaseHeartbeat]] = {}
_turns_here_lock = threading.Lock()


def turn_lease_hold(*, session: Session, lease_id: str) -> None:
    """Keep the lease just taken (and committed) until turn_lease_release: a heartbeat renews it every
    quarter of its lifetime, and the chat counts as running in this process."""
    chat = (session.user_id, session.agent_id, session.chat_id)
    heartbeat = LeaseHeartbeat(
        lambda: turn_lease_renew(session=session, lease_id=lease_id),
        every=max(0.5, settings.BUDDY_TURN_LEASE_SECONDS / 4),
        name=f"turn-lease-{session.pk}",
    )
    with _turns_here_lock:
        _turns_here[chat] += 1
        _heartbeats[lease_id] = (chat, heartbeat)
    heartbeat.start()


def turn_lease_ended(lease_id: str) -> None:
    """Stop the heartbeat of a lease taken with turn_lease_hold, and count its chat as running here no
    more, without giving the lease back (it expires): for a holder that leaves nothing to give back to."""
    _turn_here_end(lease_id)


def _turn_here_end(lease_id: str) -> None:
    with _turns_here_lock:
        held = _heartbeats.pop(lease_id, None)
        if held is None:
            return
        chat, heartbeat = held
        _turns_here[chat] -= 1
        if _turns_here[chat] <= 0:
            del _turns_here[chat]
    heartbeat.stop()


def turn_running_here(*, user_id: int, agent_id: int, chat_id: str) -> bool:
    """Whether a turn of this chat holds its lease in this process: a prompt to it would be refused
    (TurnRunning), so a socket can say so without a trip to the database. False says nothing about
    other processes."""
    return (user_id, agent_id, chat_id) in _turns_here


def turn_cancel(*, session: Session) -> bool:
    """Ask the running turn of this session, in whatever process, to stop. False if none runs."""
    running = Session.objects.filter(pk=session.pk).exclude(turn_lease_id="")
    return bool(running.filter(turn_lease_expires_at__gte=timezone.now()).update(turn_cancel_requested=True))


def turn_is_running(*, session: Session) -> bool:
    return (
        Session.objects.filter(pk=session.pk, turn_lease_expires_at__gte=timezone.now())
        .exclude(turn_lease_id="")
        .exists()
    )


class _Stopper:
    """Polls the database (at most every CANCEL_POLL_SECONDS) for a cancel, renewing the lease as it goes."""

    def __init__(self, session: Session, lease_id: str) -> None:
        self.session, self.lease_id = session, lease_id
        self.stopped = False
        self._checked = time.monotonic()  # the lease was just taken or renewed
        self._lock = threading.Lock()

    def __call__(self, *, now_or_never: bool = False) -> bool:
        if self.stopped:
            return True
        now = time.monotonic()
        if now_or_never or now - self._checked >= CANCEL_POLL_SECONDS:
            with self._lock:
                self._checked = now
                if not turn_lease_renew(session=self.session, lease_id=self.lease_id):
                    self.stopped = True
                connection_lend_back()  # polled while the model streams
        return self.stopped


# --- The turn --------------------------------------------------------------------------------


def turn_run(
    *,
    session: Session,
    text: str | None = None,
    prompt: Message | None = None,
    on_prompt: Callable[[Message], None] | None = None,
    kind: str = "typed",
) -> TurnResult:
    """Run one turn for a new prompt `text`, or resume the turn of an already archived `prompt`.
    `kind` (one of realtime.frames.PROMPT_KINDS) says what the prompt is, for the pages showing it.

    Raises PromptInvalid/PromptTooLarge (nothing archived), TurnRunning, ModelFailed (the prompt and
    every step before the failure stay archived).
    """
    if kind not in PROMPT_KINDS:
        raise ValueError(f"kind must be one of {PROMPT_KINDS}")
    if prompt is None:
        prompt_check(text or "")
    # The lease, the prompt and whatever `on_prompt` records (an Idempotency-Key) commit together: a
    # process that dies in between leaves nothing, never a prompt without its key or a key without it.
    # Without a record, each is one statement of its own (atomic by itself) and no transaction is
    # needed: a process dying between them leaves a lease that expires, as it would mid-turn.
    fresh = prompt is None
    with transaction.atomic() if on_prompt is not None else nullcontext():
        lease_id = turn_lease_acquire(session=session)
        if fresh:
            try:
                prompt = _prompt_archive(session, text=text, kind=kind, on_prompt=on_prompt)
            except BaseException:
                if on_prompt is None:  # nothing to roll the lease back with
                    turn_lease_release(session=session, lease_id=lease_id)
                raise
    turn_lease_hold(session=session, lease_id=lease_id)
    try:
        result = _turn_loop(session=session, prompt=prompt, lease_id=lease_id, fresh=fresh)
    except ModelFailed as failure:
        turn_lease_release(session=session, lease_id=lease_id)
        push_frame(session, ErrorFrame(code=failure.code, detail=failure.detail))
        raise
    except BaseException:
        turn_lease_release(session=session, lease_id=lease_id)
        raise
    try:
        turn_lease_release(session=session, lease_id=lease_id)
        # After the release: a client that answers the reply at once must not hit its own lease
        # (TurnRunning). Sources come from memory tools' results: a turn that called no tool has none.
        sources = turn_sources(session=session, reply_id=result.message_id) if result.used_tools else []
        # The user's chat lists heard of this turn with its prompt (one `chats_changed` a turn); the tab
        # that sent it reads the list again on the reply.
        push_frame(session, AssistantMessageFrame(text=result.reply, message_id=result.message_id, sources=sources))
    except BaseException:
        _index(session, result.unindexed)
        raise

    def follow_up() -> None:
        _index(session, result.unindexed)
        _memory_follow(session, result)  # after the index: the vector job reads the documents' text

    # The reply's search documents (and the prompt's, when they waited for it) and the memory jobs, once
    # the reply is out: to the sockets, and to the HTTP request waiting for it (agent.threads).
    after_answer(follow_up)
    return result


def _prompt_archive(session: Session, *, text: str, kind: str, on_prompt: Callable[[Message], None] | None) -> Message:
    """Archive a new prompt under the turn's lease. Its search document waits for the turn's first
    message that calls a tool, or else for its final reply, and is written in one batch with it
    (`index_later`; _turn_loop, turn_run)."""
    prompt = message_append(session=session, role="user", content=text, index_later=True)
    session_title_from_prompt(session=session, prompt=prompt)
    push_frame_on_commit(session, UserMessageFrame(text=text, message_id=prompt.id, kind=kind))
    chats_changed_on_commit(session, "message")  # the user's chat lists, in every tab
    if on_prompt is not None:
        on_prompt(prompt)
    return prompt


@dataclass
class _LastCall:
    """What the turn's last model call was sent (for the summary decision after the turn)."""

    window: Window
    summary: Summary | None
    added_tokens: int = 0  # archived after that call
    added_rows: int = 0


def _memory_follow(session: Session, result: TurnResult) -> None:
    """Queue the summary job if the window nears its next step, and the vector job of semantic search.
    Never fails a reply."""
    try:
        last = result.last_call
        due = (
            summary_is_due_after_turn(
                session=session,
                window=last.window,
                latest=last.summary,
                added_tokens=last.added_tokens,
                added_rows=last.added_rows,
            )
            if last is not None
            else summary_is_due(session=session)
        )
        if due:
            summary_bursts.schedule(session.pk)
    except Exception:
        logger.exception("could not queue the summary of session %s", session.pk)
    try:
        vectors_schedule(session_id=session.pk)
    except Exception:
        logger.exception("could not queue the vectors of session %s", session.pk)


# A chat's summary job, once per burst of its turns (conversations.bursts): while a summary is due,
# every turn finds it due until the job has run, and the job folds everything due when it runs. A job
# that runs in this process (inline task runs) lets the next due turn queue one at once (agent.tasks).
summary_bursts = Bursts(
    lambda session_id: async_task("agent.tasks.summary_update", session_id, group="summaries"),
    span=10.0,
    name="summary",
)


def _turn_loop(*, session: Session, prompt: Message, lease_id: str, fresh: bool) -> TurnResult:
    """`fresh`: the prompt was archived by this run (so the newest messages are known here), and is
    indexed with the first message the turn archives after it that calls a tool, or else with the
    turn's final reply, after it is out (turn_run). A turn that fails indexes what it left here."""
    unindexed = [prompt] if fresh else []
    try:
        result = _turn_steps(session=session, prompt=prompt, lease_id=lease_id, fresh=fresh, unindexed=unindexed)
    except BaseException:
        _index(session, unindexed)
        raise
    result.unindexed = unindexed
    return result


def _index(session: Session, messages: list[Message]) -> None:
    """Write the search documents of messages archived with `index_later`; never fails a turn: a
    message left without them is indexed by the next message's indexer (conversations.services)."""
    if messages:
        try:
            messages_index(messages=messages)
        except Exception:
            logger.exception("could not index messages of session %s", session.pk)


def _turn_steps(
    *, session: Session, prompt: Message, lease_id: str, fresh: bool, unindexed: list[Message]
) -> TurnResult:
    client = model_client()
    stopper = _Stopper(session, lease_id)
    spoken: list[str] = []
    last_message: Message | None = None
    last_call: _LastCall | None = None
    tool_rounds = 0
    deltas = DeltaStream(session)

    def on_text(chunk: str) -> None:
        deltas.add(json_text_cleaned(chunk))

    while True:
        # Between model calls, always look — but not right after taking the lease.
        if stopper(now_or_never=tool_rounds > 0):
            break
        # The first window's stored start came with the lease (turn_lease_acquire).
        window = window_build(session=session, stored_start=session.window_start_id if tool_rounds == 0 else None)
        summary = summary_latest(session=session)
        request = request_build(
            session=session,
            window_messages=window.messages,
            window_moved=window.moved,
            summary=summary,
            recent=window.recent,
        )
        last_call = _LastCall(window=window, summary=summary)
        connection_lend_back()
        started = time.monotonic()
        try:
            with turn_slot_lent():  # another turn works while this one waits on the model
                reply = client.stream(
                    model=model_for(session),
                    max_tokens=settings.BUDDY_MAX_OUTPUT_TOKENS,
                    on_text=on_text,
                    should_stop=stopper,
                    **request,
                )
        except ModelError as exc:
            deltas.flush()
            _record_call(session, model_for(session), None, prompt=prompt, error=str(exc), started=started)
            raise ModelFailed(str(exc)) from exc
        deltas.flush()
        _record_call(session, model_for(session), reply, prompt=prompt, started=started)
        content, refused = _archivable(reply, sent=window.messages)
        if not content:
            break
        tool_uses = [block for block in content if block.get("type") == "tool_use"]
        if tool_uses:  # its tools' results are archived next, as its neighbours: indexed now
            last_message = message_append(
                session=session, role="assistant", content=content, unindexed=unindexed[0] if unindexed else None
            )
            unindexed.clear()
        else:  # the final reply: indexed once it is out (turn_run)
            last_message = message_append(session=session, role="assistant", content=content, index_later=True)
            unindexed.append(last_message)
        last_call.added_tokens += last_message.tokens
        last_call.added_rows += 1
        said = text_of(content)
        if said:
            spoken.append(said)
        if not tool_uses:
            break
        for block in tool_uses:
            push_frame(session, ToolUseFrame(id=block["id"], name=block["name"], input=block["input"]))
        results = tool_round_run(session=session, tool_uses=tool_uses, source=last_message, refused=refused)
        for block in results.content:
            push_frame(
                session,
                ToolResultFrame.summarized(
                    tool_use_id=block.get("tool_use_id", ""),
                    is_error=bool(block.get("is_error")),
                    text=tool_result_text(block.get("content")),
                ),
            )
        tool_rounds += 1
        if tool_rounds >= settings.BUDDY_MAX_TOOL_ROUNDS and not stopper(now_or_never=True):
            notice = (
                f"I stopped here: this turn reached the limit of {settings.BUDDY_MAX_TOOL_ROUNDS} rounds of tool "
                "calls. Ask me to continue if there is more to do."
            )
            last_message = message_append(session=session, role="assistant", content=notice)
            spoken.append(notice)
            break
    reply_text = "\n\n".join(spoken)
    message_id = last_message.id if last_message is not None and last_message.role == "assistant" else None
    return TurnResult(
        reply=reply_text,
        message_id=message_id,
        prompt_id=prompt.id,
        cancelled=stopper.stopped,
        used_tools=tool_rounds > 0 or not fresh,
        last_call=last_call,
    )


def _tool_use_ids(messages: Sequence[dict]) -> set[str]:
    """The ids of the tool calls in messages as sent (a call may not reuse one: the API refuses it)."""
    return {
        block["id"]
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str)
    }


# Why a call the model made is answered with an error instead of being run (_tool_uses_sendable).
CUT_OFF = (
    "Not run: your response reached its output token limit while you were writing this call, so its "
    "input is incomplete. Make the call again with a shorter input, or in several calls."
)


def _archivable(reply: ModelReply, *, sent: Sequence[dict] = ()) -> tuple[list[dict], dict[str, str]]:
    """What of a reply may be archived: no empty text blocks; when cut short, text only (a tool_use
    that was still streaming is incomplete and was never run); no NUL or lone surrogate, which no
    database stores (a model can be made to write them, e.g. in a tool's input); tool calls the Messages
    API takes back in the next request (_tool_uses_sendable; `sent`: the messages the request held).
    Also returns the calls to answer with an error instead of running them, by id, with why."""
    content = json_text_cleaned(reply.content)
    blocks = [b for b in content if not (b.get("type") == "text" and not b.get("text", "").strip())]
    if reply.stopped_early:
        blocks = [b for b in blocks if b.get("type") == "text"]
    for block in blocks:  # the SDK adds fields the API does not accept back (e.g. citations=None)
        if block.get("type") == "text":
            for key in [k for k in block if k not in {"type", "text"}]:
                block.pop(key)
    if not any(block.get("type") == "tool_use" for block in blocks):
        return blocks, {}
    refused = _tool_uses_sendable(blocks, taken=_tool_use_ids(sent))
    last = blocks[-1]
    if reply.stop_reason == "max_tokens" and last.get("type") == "tool_use":
        refused[last["id"]] = CUT_OFF  # the call it was writing: its input is what had arrived
    return blocks, refused


def _tool_uses_sendable(blocks: list[dict], *, taken: set[str] = frozenset()) -> dict[str, str]:
    """Make every tool_use in `blocks` one the Messages API accepts back, whatever the model wrote, so
    that no later request of the chat is refused for it: an id that is not of A-Z a-z 0-9 _ - (or
    repeats one of this reply, or one of `taken`) becomes a fresh one, so each call is run and answered on its own; a
    missing or empty name becomes `unnamed_tool` (an unknown tool, answered as such); an input that is
    not an object becomes `{}`, and that call is not run. Returns why, by id, for the calls not to run."""
    seen: set[str] = set(taken)
    refused: dict[str, str] = {}
    for block in blocks:
        if block.get("type") != "tool_use":
            continue
        tool_id = block.get("id")
        if not isinstance(tool_id, str) or not TOOL_USE_ID_RE.fullmatch(tool_id) or tool_id in seen:
            tool_id = block["id"] = f"toolu_buddy_{uuid.uuid4().hex}"
        seen.add(tool_id)
        if not isinstance(block.get("name"), str) or not block["name"]:
            block["name"] = "unnamed_tool"
        if not isinstance(block.get("input"), dict):
            block["input"] = {}
            refused[tool_id] = NOT_AN_OBJECT
    return refused


def _record_call(
    session: Session, model: str, reply: ModelReply | None, *, prompt: Message, started: float, error: str = ""
) -> ModelCall:
    return model_call_record(
        session=session,
        kind=ModelCall.Kind.CHAT,
        model=model,
        reply=reply,
        started=started,
        error=error,
        prompt=prompt,
    )
