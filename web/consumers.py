"""The WebSocket `/ws/?agent=buddy&chat_id=main` (README, "HTTP API").

The socket is always the connecting user's: the query names one of *their* chats. It joins the chat's
group (named by user, agent and chat id, so a chat created after the socket opened still reaches it)
and the user's group (logout closes every socket of the user).

Handshake: an anonymous user is refused (HTTP 403, as is an Origin other than the server's own
scheme, host and port or a trusted one, by buddy.origins). An invalid `chat_id` or an unknown `agent` in the query
is accepted only to send one `error` frame (`invalid_chat_id` / `unknown_agent`) and then closed with
code 4400 / 4404, so a client can tell the user why.

Every frame, both ways, and every error code is listed and built in conversations/events.py; bad
frames answer an `error` frame and the socket stays open; a socket whose login was revoked answers a
prompt with logged_out and closes with 4401. This module parses, calls one function of agent.chat (or
the canvas replay), and answers; it runs no query itself.

Frames the client must know about beyond the README's list:
- `canvas_update_card` carries the element's complete fields after the change: replace the element
  with that id, keeping its position. A confirmation answered carries `answered`: "confirmed" or
  "declined".
- `canvas_show_notification` has its own `version` like every canvas frame (it is never replayed).
- `assistant_message` carries `sources`: the archived messages the turn's memory tools cited
  (`[{"id", "agent", "chat_id", "role", "created_at"}]`, empty when it used none), as `GET /history`.
- A `confirmation_response` to the server's question about a profile note (an id starting with
  `memory-`) also decides that change: applied exactly as shown when confirmed (or not at all, the
  answered element's `outcome` and the answer's prompt saying why), dropped when declined
  (docs/memory.md). A `canvas_set_mode` clear may carry `keep`: the ids of elements it leaves.
- A frame whose `version` is not above the client's is a duplicate (it may arrive right after a
  replay that already included it): ignore it. A version more than one above the client's means a
  frame was lost: send `replay`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.db import close_old_connections

from agent.chat import LoginNoLongerValid, chat_cancel, chat_confirmation_answer, chat_open, chat_prompt
from agent.turn import ModelFailed, TurnError
from canvas.elements import CanvasCommandError
from canvas.limits import MAX_FRAME_BYTES
from canvas.push import chat_group, local_socket_closed, local_socket_opened, user_group
from canvas.relay import relay_ensure_started
from canvas.selectors import canvas_replay_frames_of
from conversations import events
from conversations.content import CHAT_ID_INVALID, CHAT_ID_RE, agent_or_default, chat_id_or_default
from conversations.models import Agent
from conversations.selectors import agent_get

logger = logging.getLogger(__name__)

T = TypeVar("T")

CLOSE_INVALID_QUERY = 4400
CLOSE_LOGGED_OUT = 4401
CLOSE_UNKNOWN_AGENT = 4404


def _in_db_thread(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """database_sync_to_async on the loop's thread pool. The default (thread_sensitive) runs every
    consumer's database call in one shared thread, so a burst of connects queues behind one another;
    these functions are self-contained (one query set or one atomic block each), so any thread will do."""
    return database_sync_to_async(function, thread_sensitive=False)


class FrameError(Exception):
    """Bad input in a client frame; becomes an `error` frame, the socket stays open."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@functools.cache
def turn_executor() -> ThreadPoolExecutor:
    """The threads WebSocket turns run on. A turn waits on the model for seconds; on the loop's default
    pool (a handful of threads on a small machine, shared with every replay and database call of
    every socket) a few slow model calls would stall every socket. When all BUDDY_TURN_THREADS are
    busy, a turn waits for one."""
    return ThreadPoolExecutor(max_workers=settings.BUDDY_TURN_THREADS, thread_name_prefix="buddy-turn")


def _socket_turn(**prompt: Any) -> None:
    """chat_prompt on a turn thread, which leaves no database connection behind."""
    try:
        chat_prompt(**prompt)
    finally:
        close_old_connections()


_chat_open = _in_db_thread(chat_open)
_chat_replay = _in_db_thread(canvas_replay_frames_of)
_chat_cancel = _in_db_thread(chat_cancel)
_chat_confirmation_answer = _in_db_thread(chat_confirmation_answer)
_agent_get = _in_db_thread(agent_get)

# Agent slug → id, learned by this process: lets a connect join the chat's group before its one trip to
# the database (each trip to a database thread costs more than its queries on a busy server). Only a
# hint: the trip checks it, and a wrong one costs a second read.
_agent_id_hints: dict[str, int] = {}


# A lone surrogate is not Unicode text: a JSON escape such as "\\ud800", or invalid UTF-8 that the
# transport passed on as surrogate escapes (buddy.daphne_server). Neither can be stored or encoded.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _check_text(value: str) -> None:
    if _SURROGATE_RE.search(value):
        raise FrameError("invalid_unicode", "the frame holds text that is not valid Unicode (a lone surrogate)")
    if "\x00" in value:
        raise FrameError("nul_character", "the frame holds a NUL character, which text may not contain")


def _check_content(content: Any) -> None:
    """Every string (keys too) is valid Unicode without NUL; nesting stays within BUDDY_WS_MAX_DEPTH.
    Iterative, so no frame can exhaust the stack."""
    max_depth = settings.BUDDY_WS_MAX_DEPTH
    pending: list[tuple[Any, int]] = [(content, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, dict | list):
            if depth > max_depth:
                raise FrameError("too_deep", f"a frame nests arrays and objects at most {max_depth} deep")
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(key)
                    pending.append((item, depth + 1))
            else:
                pending.extend((item, depth + 1) for item in value)


def _string_field(content: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = content.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FrameError("invalid_field", f"`{name}` must be a string")
    return value


class CanvasConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab's socket on one of its user's chats."""

    # Set in connect(); the turn code reads them.
    user: Any
    agent: Agent
    chat_id: str
    chat_group_name: str = ""
    opened = False  # connect() went through: the socket follows a chat
    counted = False  # counted among this process's sockets (canvas/push.py)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn_tasks: set[asyncio.Task] = set()
        # At most one replay runs per socket, and replays are BUDDY_WS_REPLAY_INTERVAL apart: requests
        # that arrive meanwhile become one more replay.
        self.replay_task: asyncio.Task | None = None
        self.replay_wanted = False
        self.replays_answered = asyncio.Event()  # no replay is waiting to be sent
        self.replays_answered.set()

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()  # before accept(): the handshake is refused
            return
        self.user = user
        local_socket_opened()
        self.counted = True
        relay_ensure_started()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        chat_id = chat_id_or_default(query.get("chat_id", [""])[-1])
        agent_slug = agent_or_default(query.get("agent", [""])[-1])
        await self.accept()
        if not CHAT_ID_RE.match(chat_id):
            await self.send_error("invalid_chat_id", CHAT_ID_INVALID)
            await self.close(code=CLOSE_INVALID_QUERY)
            return
        self.chat_id = chat_id
        await self._join(user_group(user.pk))
        # The chat's group is joined before its state is read, so no change between the read and the
        # join is missed; a frame already included in the replay comes after it, with a version the
        # client already has.
        if "\x00" in agent_slug:  # no agent has one, and PostgreSQL cannot even compare it
            await self.send_error("unknown_agent", "there is no agent with a NUL character in its name")
            await self.close(code=CLOSE_UNKNOWN_AGENT)
            return
        hint = _agent_id_hints.get(agent_slug)
        if hint is not None:
            await self._join_chat_group(hint)
        agent, frames = await _chat_open(agent_slug=agent_slug, user_id=user.pk, chat_id=chat_id)
        if agent is None:
            _agent_id_hints.pop(agent_slug, None)
            await self.send_error("unknown_agent", f"there is no agent {agent_slug[:64]!r}")
            await self.close(code=CLOSE_UNKNOWN_AGENT)
            return
        self.agent = agent
        if agent.pk != hint:
            _agent_id_hints[agent_slug] = agent.pk
            await self._join_chat_group(agent.pk)
            frames = await _chat_replay(user_id=user.pk, agent_id=agent.pk, chat_id=chat_id)  # again, after the join
        self.opened = True
        await self._send_all(frames)

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            local_socket_closed()

    async def _join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.groups.append(group)  # the base class leaves every group in self.groups on disconnect

    async def _join_chat_group(self, agent_id: int) -> None:
        """Follow the chat of agent `agent_id` (and no other)."""
        group = chat_group(user_id=self.user.pk, agent_id=agent_id, chat_id=self.chat_id)
        if group == self.chat_group_name:
            return
        if self.chat_group_name:
            await self.channel_layer.group_discard(self.chat_group_name, self.channel_name)
            self.groups.remove(self.chat_group_name)
        self.chat_group_name = group
        await self._join(group)

    async def send_replay(self) -> None:
        await self._send_all(await _chat_replay(user_id=self.user.pk, agent_id=self.agent.pk, chat_id=self.chat_id))

    async def _send_all(self, frames: list[dict[str, Any]]) -> None:
        for frame in frames:
            await self.send_json(frame)

    async def send_error(self, code: str, detail: str) -> None:
        await self.send_json(events.error(code, detail))

    # --- client → server ------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Parse one frame. Overridden so that bad input answers an error frame instead of raising,
        which would close the socket (channels #2219)."""
        if not self.opened:
            return  # refused in connect() and closing: nothing to answer
        try:
            content = self._parse(text_data, bytes_data)
            if content["type"] == "replay":
                self.request_replay()
                return
            # Answers keep the order of the requests: what follows a replay comes after it.
            await self.replays_answered.wait()
            handler_name = self.frame_handlers.get(content["type"])
            if handler_name is None:
                raise FrameError(
                    "unknown_type",
                    f"unknown frame type {content['type'][:64]!r}; known: {', '.join(self.frame_handlers)}",
                )
            await getattr(self, handler_name)(content)
        except FrameError as error:
            await self.send_error(error.code, error.detail)

    @staticmethod
    def _parse(text_data: str | None, bytes_data: bytes | None) -> dict[str, Any]:
        if text_data is None:
            raise FrameError("binary_frame", "frames must be JSON text, not binary")
        # surrogatepass: a lone surrogate is counted here and refused by _check_content.
        if len(text_data) > MAX_FRAME_BYTES or len(text_data.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
            raise FrameError("frame_too_large", f"a frame is at most {MAX_FRAME_BYTES} bytes")
        try:
            content = json.loads(text_data)
        except RecursionError:
            depth = settings.BUDDY_WS_MAX_DEPTH
            raise FrameError("too_deep", f"a frame nests arrays and objects at most {depth} deep") from None
        except ValueError:
            raise FrameError("invalid_json", "the frame is not valid JSON") from None
        _check_content(content)
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            raise FrameError("invalid_frame", 'a frame is a JSON object with a string "type"')
        return content

    async def on_prompt(self, content: dict[str, Any]) -> None:
        text = _string_field(content, "text")
        if not text.strip():
            raise FrameError("invalid_field", "`text` must not be empty")
        await self.start_turn(text)

    async def on_cancel(self, content: dict[str, Any]) -> None:
        await self.cancel_turn()

    def request_replay(self) -> None:
        """Replay the canvas, coalescing: a client that asks again and again without reading gets
        one replay now and one for all the requests made in the next BUDDY_WS_REPLAY_INTERVAL
        seconds, never one per request (each may be 800 KB the server would have to buffer)."""
        self.replay_wanted = True
        self.replays_answered.clear()
        if self.replay_task is None:
            self.replay_task = asyncio.create_task(self._replay_while_wanted())

    async def _replay_while_wanted(self) -> None:
        try:
            while self.replay_wanted:
                self.replay_wanted = False
                await self.send_replay()
                if not self.replay_wanted:
                    self.replays_answered.set()
                await asyncio.sleep(settings.BUDDY_WS_REPLAY_INTERVAL)
        finally:
            self.replay_task = None
            self.replays_answered.set()

    async def on_switch_agent(self, content: dict[str, Any]) -> None:
        slug = agent_or_default(_string_field(content, "agent", required=False))
        agent = await _agent_get(slug=slug)
        if agent is None:
            raise FrameError("unknown_agent", f"there is no agent {slug[:64]!r}")
        self.agent = agent
        await self._join_chat_group(agent.pk)
        await self.send_json(events.agent_switch(slug=agent.slug, name=agent.name, avatar=agent.avatar))
        await self.send_replay()

    async def on_confirmation_response(self, content: dict[str, Any]) -> None:
        element_id = _string_field(content, "id")
        confirmed = content.get("confirmed")
        if not isinstance(confirmed, bool):
            raise FrameError("invalid_field", "`confirmed` must be true or false")
        try:
            answer = await _chat_confirmation_answer(
                user_id=self.user.pk,
                agent_id=self.agent.pk,
                chat_id=self.chat_id,
                element_id=element_id,
                confirmed=confirmed,
            )
        except CanvasCommandError as error:
            raise FrameError(error.code, str(error)) from None
        await self.start_turn(answer, kind="confirmation")

    # Frame type → method name (names, so a subclass may override a handler).
    frame_handlers = {
        "prompt": "on_prompt",
        "cancel": "on_cancel",
        "replay": "request_replay",  # handled in receive(), before this table
        "switch_agent": "on_switch_agent",
        "confirmation_response": "on_confirmation_response",
    }

    # --- turns ------------------------------------------------------------------------------------

    async def start_turn(self, text: str, kind: str = "typed") -> None:
        """Run `text` as a turn of this socket's chat, in a task: the consumer handles one event at a
        time, and its own deltas (group messages) must reach it while the turn runs. The turn pushes
        `user_message`, `tool_use`, `tool_result`, `assistant_delta`, `assistant_message` (and a
        `model_failed` error) to every socket of the chat; refusals (turn_running, too_large, …) answer this socket
        only."""
        task = asyncio.create_task(self._turn(text, kind))
        self.turn_tasks.add(task)
        task.add_done_callback(self.turn_tasks.discard)

    async def _turn(self, text: str, kind: str) -> None:
        try:
            await sync_to_async(_socket_turn, thread_sensitive=False, executor=turn_executor())(
                user=self.user,
                django_session=self.scope.get("session"),
                agent_slug=self.agent.slug,
                chat_id=self.chat_id,
                text=text,
                kind=kind,
            )
        except ModelFailed:
            pass  # the turn already told every socket of the chat
        except LoginNoLongerValid as error:
            await self.send_error(error.code, str(error))
            await self.close(code=CLOSE_LOGGED_OUT)
        except TurnError as error:
            await self.send_error(error.code, str(error))
        except Exception:
            logger.exception("turn over the WebSocket failed")
            await self.send_error("internal_error", "the turn failed unexpectedly; what was archived stays")

    async def cancel_turn(self) -> None:
        """Stop the running turn of this socket's chat, whichever process or socket started it."""
        if not await _chat_cancel(user_id=self.user.pk, agent_id=self.agent.pk, chat_id=self.chat_id):
            await self.send_error("no_turn_running", "there is no running turn to cancel")

    # --- group messages ---------------------------------------------------------------------------

    async def frame(self, event: dict[str, Any]) -> None:
        await self.send_json(event["frame"])

    async def user_logout(self, event: dict[str, Any]) -> None:
        await self.close(code=CLOSE_LOGGED_OUT)
