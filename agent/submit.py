"""A prompt from outside — HTTP, WebSocket, a schedule — turned into a turn, with `Idempotency-Key`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError

from agent.limits import prompt_rate_check
from agent.models import IdempotencyKey
from agent.turn import (
    ModelFailed,
    PromptInvalid,
    TurnResult,
    TurnRunning,
    prompt_check,
    turn_is_running,
    turn_run,
)
from conversations.content import text_of, text_problem
from conversations.models import Message, Session
from conversations.refs import DEFAULT_CHAT, ChatRef
from conversations.services import session_get_or_create

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


class IdempotencyKeyInvalid(PromptInvalid):
    code = "invalid_idempotency_key"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, field=IDEMPOTENCY_KEY_HEADER)


@dataclass(frozen=True)
class PromptReply:
    """What a submitted prompt's turn said, and in which chat."""

    reply: str
    message_id: int | None  # the final assistant message, None when nothing was said
    agent: str
    chat_id: str


def _ok(session: Session, result: TurnResult) -> PromptReply:
    return PromptReply(
        reply=result.reply, message_id=result.message_id, agent=session.agent.slug, chat_id=session.chat_id
    )


def prompt_session(*, user: AbstractBaseUser, chat: ChatRef) -> Session:
    """The session a prompt goes to (created on first use). Raises UnknownAgent (not_found)."""
    return session_get_or_create(user=user, agent_slug=chat.agent, chat_id=chat.chat_id)


def prompt_submit(
    *,
    user: AbstractBaseUser,
    text: str,
    chat: ChatRef = DEFAULT_CHAT,
    idempotency_key: str | None = None,
    kind: str = "typed",
) -> PromptReply:
    """Run one turn in `chat` and return what it said. Raises DomainError subclasses for refusals
    (TurnError kinds, UnknownAgent, RateLimited). `kind` says what started it (turn_run).

    With a key, the key's record is written in the transaction that takes the turn's lease and
    archives the prompt: a record never exists without its prompt, and a prompt never without its
    record, wherever the process dies. A repeat finds either nothing (nothing ran: run it now) or the
    record (answer from it, or from the archive)."""
    prompt_check(text)
    if not idempotency_key:
        prompt_rate_check(user_id=user.pk)  # before the chat is made: a refused prompt creates nothing
        session = prompt_session(user=user, chat=chat)
        return _ok(session, turn_run(session=session, text=text, kind=kind))
    if text_problem(idempotency_key):
        raise IdempotencyKeyInvalid(f"The Idempotency-Key {text_problem(idempotency_key)}.")
    key = idempotency_key[:255]
    record = IdempotencyKey.objects.filter(user=user, key=key).first()
    if record is not None:
        return _repeat(_same_request(record, text=text, chat=chat))
    prompt_rate_check(user_id=user.pk)
    session = prompt_session(user=user, chat=chat)

    def remember_prompt(prompt: Message) -> None:
        IdempotencyKey.objects.create(user=user, key=key, session=session, prompt=prompt)

    try:
        answer = _ok(session, turn_run(session=session, text=text, on_prompt=remember_prompt, kind=kind))
    except IntegrityError:
        # The same key committed first (its turn ended between our look-up and our lease): our
        # prompt was rolled back with the record, so answer as that request did.
        record = IdempotencyKey.objects.get(user=user, key=key)
        return _repeat(_same_request(record, text=text, chat=chat))
    except ModelFailed as exc:  # the prompt is archived; the first answer is this failure
        _store_failure(user, key, exc)
        raise
    _store(user, key, answer)
    return answer


def _same_request(record: IdempotencyKey, *, text: str, chat: ChatRef) -> IdempotencyKey:
    """The record of a repeated key, if the request is the same one (text, agent and chat); a key reused
    for another request is invalid input, never an answer to a request it was not."""
    session, prompt = record.session, record.prompt
    same = (
        session is not None
        and prompt is not None
        and session.agent.slug == chat.agent
        and session.chat_id == chat.chat_id
        and text_of(prompt.content) == text
    )
    if not same:
        raise IdempotencyKeyInvalid(
            "This Idempotency-Key was used for a different request (another text, agent or chat)."
        )
    return record


def _store(user: AbstractBaseUser, key: str, answer: PromptReply) -> None:
    IdempotencyKey.objects.filter(user=user, key=key).update(response=asdict(answer))


def _store_failure(user: AbstractBaseUser, key: str, failure: ModelFailed) -> None:
    """A failed first answer is stored as `{"detail": ...}`: a repeat raises ModelFailed again."""
    IdempotencyKey.objects.filter(user=user, key=key).update(response={"detail": str(failure)})


def _repeat(record: IdempotencyKey) -> PromptReply:
    """A repeat of a key: the first answer, or — if the first request died mid-turn — that turn's
    answer from the archive (resuming it when it is still the newest turn). Never a second prompt."""
    record.refresh_from_db()
    if record.response is not None:
        if "detail" in record.response:
            raise ModelFailed(record.response["detail"])
        return PromptReply(**record.response)
    session, prompt = record.session, record.prompt
    if session is None or prompt is None or turn_is_running(session=session):
        raise TurnRunning()
    after = list(Message.objects.filter(session=session, id__gt=prompt.id).order_by("id"))
    turn_messages = after[: _turn_length(after)]
    last = turn_messages[-1] if turn_messages else None
    finished = (
        last is not None and last.role == "assistant" and not any(b.get("type") == "tool_use" for b in last.content)
    )
    if len(turn_messages) == len(after) and not finished:
        result = turn_run(session=session, prompt=prompt)
    else:
        spoken = [m for m in turn_messages if m.role == "assistant"]
        result = TurnResult(
            reply="\n\n".join(t for t in (text_of(m.content) for m in spoken) if t),
            message_id=spoken[-1].id if spoken else None,
            prompt_id=prompt.id,
        )
    answer = _ok(session, result)
    _store(record.user, record.key, answer)
    return answer


def _turn_length(after: list[Message]) -> int:
    for index, message in enumerate(after):
        if message.is_turn_start:
            return index
    return len(after)
