"""Frames to every socket of a chat, in every server process, through the channel layer.

The database stays the source of truth: a layer may drop a message (channels-redis does past its
capacity), and a client that sees a gap in the canvas `version` asks for a replay.

With the in-memory channel layer of the embedded default, a layer reaches only its own process: a
process that serves no sockets (the task worker running a scheduled prompt) writes its group messages
to the database instead, and the server process relays them (realtime/relay.py). The server process
itself never does: whoever can receive its frames is one of its own sockets.

A chat's group is named by what names the chat — (user, agent, chat_id) — not by the session's id:
a socket may be opened on a chat that does not exist yet (it replays empty and creates nothing), and
it must receive the chat's frames as soon as a prompt creates the session.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations.models import Session
from realtime.frames import AssistantDeltaFrame, ChatChange, ChatDeletedFrame, ChatsChangedFrame, ServerFrame
from realtime.models import RelayedFrame

logger = logging.getLogger(__name__)

# Sent to `user_group(user_id)`: every socket of that user closes (logout).
USER_LOGOUT_MESSAGE = {"type": "user.logout"}


def chat_group(*, user_id: int, agent_id: int, chat_id: str) -> str:
    # Group names must be < 100 characters of [A-Za-z0-9._-]; a chat id may be 64 characters and hold
    # ':', so it goes in as a digest.
    digest = hashlib.blake2b(chat_id.encode("utf-8"), digest_size=12).hexdigest()
    return f"chat.{user_id}.{agent_id}.{digest}"


def session_group(session: Session | int) -> str:
    """The group of a session's sockets. Pass the Session when you have it: an id costs a query."""
    if not isinstance(session, Session):
        session = Session.objects.only("user_id", "agent_id", "chat_id").get(pk=session)
    return chat_group(user_id=session.user_id, agent_id=session.agent_id, chat_id=session.chat_id)


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


# Sockets open in this process (counted by the consumer), and whether it is the server that holds them.
_local_sockets = 0
_serves_sockets = False
_database_writes = 0
PRUNE_EVERY_WRITES = 500


def sockets_served_here() -> None:
    """This process is the one that serves the sockets (buddy/asgi.py): its frames go to its own
    layer even while no socket is open, since nobody else could receive them."""
    global _serves_sockets
    _serves_sockets = True


def local_socket_opened() -> None:
    global _local_sockets
    _local_sockets += 1


def local_socket_closed() -> None:
    global _local_sockets
    _local_sockets = max(0, _local_sockets - 1)


def layer_is_in_memory() -> bool:
    return settings.CHANNEL_LAYERS["default"]["BACKEND"].endswith("InMemoryChannelLayer")


def _through_database() -> bool:
    """Whether this process's group messages must go through the database to reach any socket."""
    return _local_sockets == 0 and not _serves_sockets and layer_is_in_memory()


class _Handoff:
    """Group messages from other threads (a turn's) to the server's event loop, without waiting for the
    loop: each is queued with one thread-safe call, and one task at a time sends the queue in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: deque[tuple[str, dict[str, Any]]] = deque()
        self.task: asyncio.Task | None = None  # touched on the loop only

    def put(self, group: str, message: dict[str, Any]) -> None:
        self.pending.append((group, message))
        if self.task is None:
            self.task = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        layer = get_channel_layer()
        try:
            while self.pending:
                group, message = self.pending.popleft()
                message = self._with_frames_after(group, message)
                try:
                    await layer.group_send(group, message)
                except Exception:
                    logger.exception("push to group %s failed", group)
        finally:
            self.task = None

    def _with_frames_after(self, group: str, message: dict[str, Any]) -> dict[str, Any]:
        """`message`, or, when frames for the same group are queued right behind it, all of them as one
        `frames` message (in order): one channel-layer send, and one message for each socket to read,
        instead of one per frame. Nothing waits for company: only what already queued up is merged."""
        frames: list[dict[str, Any]] = []
        while (
            message["type"] == "frame"
            and self.pending
            and self.pending[0][0] == group
            and self.pending[0][1]["type"] == "frame"
        ):
            frames.append(self.pending.popleft()[1]["frame"])
        if not frames:
            return message
        return {"type": "frames", "frames": [message["frame"], *frames]}


_handoff: _Handoff | None = None


def group_sends_handed_off() -> None:
    """Called on the server's event loop (agent.threads, before a turn): from then on, group messages
    sent from other threads are handed to that loop without waiting for it. Without it (the task
    worker, a management command, a test running a turn itself) a sender waits for its send."""
    global _handoff
    loop = asyncio.get_running_loop()
    if _handoff is None or _handoff.loop is not loop:
        _handoff = _Handoff(loop)


def _hand_off(group: str, message: dict[str, Any]) -> bool:
    handoff = _handoff
    if handoff is None or not handoff.loop.is_running():
        return False
    try:
        handoff.loop.call_soon_threadsafe(handoff.put, group, message)
    except RuntimeError:  # the loop closed meanwhile
        return False
    return True


def _group_send(group: str, message: dict[str, Any], *, relay: bool = True) -> None:
    """Send now, or hand to the server's loop (group_sends_handed_off). A failing layer is logged,
    never raised: pushing is best effort. `relay=False`: never through the database (a frame that must
    leave no row behind, e.g. a deleted chat's notice)."""
    try:
        if _through_database():
            if not relay:
                return  # no socket in this process, and the in-memory layer reaches no other one
            global _database_writes
            RelayedFrame.objects.create(group=group, message=message)
            _database_writes += 1
            if _database_writes % PRUNE_EVERY_WRITES == 0:  # rows are relayed within a second; keep a minute
                RelayedFrame.objects.filter(created_at__lt=timezone.now() - timedelta(minutes=1)).delete()
            return
        if not _hand_off(group, message):
            async_to_sync(get_channel_layer().group_send)(group, message)
    except Exception:
        logger.exception("push to group %s failed", group)


def _frame_message(frame: ServerFrame) -> dict[str, Any]:
    """The group message carrying a frame: only frame models are pushed (realtime/frames.py)."""
    return {"type": "frame", "frame": frame.dump()}


def push_frame(session: Session | int, frame: ServerFrame) -> None:
    """Send one frame to the session's sockets now (best effort)."""
    _group_send(session_group(session), _frame_message(frame))


def push_frame_on_commit(session: Session | int, frame: ServerFrame) -> None:
    """Send after the surrounding transaction commits, so no socket sees a change that was rolled back
    (outside a transaction: now). The group is resolved now, inside the transaction, where a
    just-created session is visible.
    """
    group = session_group(session)
    message = _frame_message(frame)
    transaction.on_commit(lambda: _group_send(group, message))


class DeltaStream:
    """A reply's text as `assistant_delta` frames, at most one per BUDDY_DELTA_INTERVAL seconds: the first
    piece goes at once, pieces that follow sooner wait for the next piece after the interval or for
    flush() (the end of the model's answer, or a frame that must come after the text so far)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.pieces: list[str] = []
        self.sent_at = float("-inf")

    def add(self, text: str) -> None:
        self.pieces.append(text)
        if time.monotonic() - self.sent_at >= settings.BUDDY_DELTA_INTERVAL:
            self.flush()

    def flush(self) -> None:
        if self.pieces:
            text, self.pieces = "".join(self.pieces), []
            push_frame(self.session, AssistantDeltaFrame(text=text))
            self.sent_at = time.monotonic()


def user_sockets_close(*, user_id: int) -> None:
    """Close every socket of the user, in every process (best effort)."""
    _group_send(user_group(user_id), dict(USER_LOGOUT_MESSAGE))


def chats_changed_on_commit(session: Session, change: ChatChange) -> None:
    """Tell every socket of the session's user that this chat changed (the chat list follows), once the
    surrounding transaction commits."""
    frame = ChatsChangedFrame(change=change, agent=session.agent.slug, chat_id=session.chat_id)
    message = _frame_message(frame)
    group = user_group(session.user_id)
    transaction.on_commit(lambda: _group_send(group, message))


def chat_deleted_on_commit(*, user_id: int, agent_id: int, agent: str, chat_id: str) -> None:
    """Once the deletion commits: `chat_deleted` to the chat's sockets and `chats_changed` to every
    socket of the user. Never relayed through the database, which must keep nothing of the chat."""
    group = chat_group(user_id=user_id, agent_id=agent_id, chat_id=chat_id)
    notice = _frame_message(ChatDeletedFrame(agent=agent, chat_id=chat_id))
    changed = _frame_message(ChatsChangedFrame(change="deleted", agent=agent, chat_id=chat_id))

    def send() -> None:
        _group_send(group, notice, relay=False)
        _group_send(user_group(user_id), changed, relay=False)

    transaction.on_commit(send)
