"""What the chat WebSocket (web/consumers.py) asks of the agent. Each function is one trip to the
database, which the consumer runs on a thread; refusals are domain exceptions (conversations.errors,
agent.turn, CanvasCommandError) the consumer turns into `error` frames (realtime.frames). The frames
that show a canvas are built here (agent.canvas) from what the canvas app returns."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import HASH_SESSION_KEY, get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils.crypto import constant_time_compare

from agent.canvas import canvas_confirmation_answer, canvas_replay_frames
from agent.submit import prompt_submit
from agent.turn import TurnError, turn_cancel
from canvas.elements import CanvasCommandError
from canvas.services import canvas_lock
from conversations.content import confirmation_answer_text
from conversations.models import Agent
from conversations.prepared import PreparedQuery
from conversations.refs import ChatRef
from conversations.selectors import agent_get, session_find
from memory.notes.proposals import note_proposal_answer
from realtime.frames import CanvasCommandFrame


class LoginNoLongerValid(TurnError):
    code = "logged_out"

    def __init__(self) -> None:
        super().__init__("This login is no longer valid (logged out, password changed or user deactivated).")


_ACTIVE_USER = PreparedQuery(
    lambda pk: get_user_model()._default_manager.filter(pk=pk, is_active=True).order_by("pk")[:1], pk=int
)


def _login_still_valid(user: AbstractBaseUser, django_session: Any) -> bool:
    """The socket's login as a request would check it now: the user is active and the session's
    password hash is still the user's. The close a password change or deactivation sends is best
    effort; this check is not."""
    found = _ACTIVE_USER.rows(pk=user.pk)
    if not found:
        return False
    current = found[0]
    session_hash = django_session.get(HASH_SESSION_KEY) if django_session is not None else None
    return not session_hash or constant_time_compare(session_hash, current.get_session_auth_hash())


def chat_prompt(*, user: AbstractBaseUser, django_session: Any, chat: ChatRef, text: str, kind: str) -> None:
    """Run `text` as a turn of the chat, if the socket's login still holds (else LoginNoLongerValid).
    The turn's frames reach every socket of the chat; refusals raise DomainError subclasses."""
    if not _login_still_valid(user, django_session):
        raise LoginNoLongerValid()
    prompt_submit(user=user, text=text, chat=chat, kind=kind)


def chat_replay(*, user_id: int, agent_id: int, chat_id: str) -> list[CanvasCommandFrame]:
    """The frames that rebuild the user's chat's canvas (empty when the chat does not exist)."""
    return canvas_replay_frames(session=session_find(user_id=user_id, agent_id=agent_id, chat_id=chat_id))


def chat_open(*, user_id: int, chat: ChatRef) -> tuple[Agent | None, list[CanvasCommandFrame]]:
    """The agent a socket asks for and its chat's canvas replay, in one trip (None, [] for no agent)."""
    agent = agent_get(slug=chat.agent)
    if agent is None:
        return None, []
    return agent, chat_replay(user_id=user_id, agent_id=agent.pk, chat_id=chat.chat_id)


def chat_cancel(*, user_id: int, agent_id: int, chat_id: str) -> bool:
    """Ask the chat's running turn, in whatever process, to stop; False when none runs."""
    session = session_find(user_id=user_id, agent_id=agent_id, chat_id=chat_id)
    return session is not None and turn_cancel(session=session)


def chat_confirmation_answer(*, user_id: int, agent_id: int, chat_id: str, element_id: str, confirmed: bool) -> str:
    """Answer the confirmation `element_id` on the chat's canvas (its change reaches the chat's sockets
    on commit); returns the prompt that runs the answer as a turn. A question about the user's memory
    (docs/memory.md) is decided with it: the element and the prompt both say what the yes did. Raises
    CanvasCommandError (unknown_element, not_a_confirmation, already_answered)."""
    session = session_find(user_id=user_id, agent_id=agent_id, chat_id=chat_id)
    if session is None:
        raise CanvasCommandError(f"no element `{element_id}` on the canvas", code="unknown_element")
    with transaction.atomic():  # the answer and the profile note it decides commit together
        canvas_lock(session=session)  # first, as a tool round takes it (agent.tools)
        proposal = note_proposal_answer(session=session, element_id=element_id, confirmed=confirmed)
        outcome = proposal.outcome if proposal is not None and confirmed else None
        canvas_confirmation_answer(session=session, element_id=element_id, confirmed=confirmed, outcome=outcome)
    return confirmation_answer_text(element_id=element_id, confirmed=confirmed, outcome=outcome)
