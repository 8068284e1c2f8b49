"""The WebSocket `/ws/?agent=buddy&chat_id=main` (README: WebSocket).

The socket is always the connecting user's: the query names one of *their* chats. It joins the chat's
group (named by user, agent and chat id, so a chat created after the socket opened still reaches it)
and the user's group (logout closes every socket of the user).

Handshake: an anonymous user is refused (HTTP 403, as is an Origin other than the server's own
scheme, host and port or a trusted one, by buddy.origins). The query is read as a ChatRef, the rule
every transport shares: an invalid `chat_id` or `agent` is accepted only to send one `error` frame
(`invalid_chat_id` / `invalid_agent`) and then closed with code 4400; an unknown agent likewise with
`not_found` and 4404 — so a client can tell the user why.

Every frame, both ways, is one model of realtime/frames.py, with every error code; a client frame is
read by realtime.frames.client_frame_read, bad frames answer an `error` frame and the socket stays
open; a socket whose login was revoked answers a prompt with logged_out and closes with 4401. This
module parses, calls one function of agent.chat, and answers; it runs no query itself.

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
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from agent.chat import LoginNoLongerValid, chat_cancel, chat_confirmation_answer, chat_open, chat_prompt, chat_replay
from agent.limits import PromptBucket
from agent.threads import on_turn_thread
from agent.turn import ModelFailed, TurnRunning, prompt_check, turn_running_here
from canvas.elements import CanvasCommandError
from conversations.errors import DomainError, InvalidInput
from conversations.models import Agent
from conversations.refs import ChatRef
from conversations.selectors import agent_get
from conversations.services import UnknownAgent
from realtime.frames import (
    AgentOut,
    AgentSwitchFrame,
    CancelFrame,
    ClientFrame,
    ConfirmationResponseFrame,
    ErrorCode,
    ErrorFrame,
    FrameError,
    PromptFrame,
    ReplayFrame,
    SwitchAgentFrame,
    client_frame_read,
)
from realtime.limits import MAX_FRAME_BYTES
from realtime.push import chat_group, local_socket_closed, local_socket_opened, user_group
from realtime.relay import relay_ensure_started

logger = logging.getLogger(__name__)

T = TypeVar("T")

CLOSE_INVALID_QUERY = 4400
CLOSE_LOGGED_OUT = 4401
CLOSE_UNKNOWN_AGENT = 4404

# After answering a refused frame, a socket's next frame waits this long: a client that floods a
# socket with frames to refuse has them answered at a bounded pace, and (buddy/server.py) stops being
# read meanwhile, so its flood costs the other sockets little (docs/security.md, "Floods").
REFUSAL_PAUSE_SECONDS = 0.05


def _in_db_thread(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """database_sync_to_async on the loop's thread pool. The default (thread_sensitive) runs every
    consumer's database call in one shared thread, so a burst of connects queues behind one another;
    these functions are self-contained (one query set or one atomic block each), so any thread will do."""
    return database_sync_to_async(function, thread_sensitive=False)


_chat_open = _in_db_thread(chat_open)
_chat_replay = _in_db_thread(chat_replay)
_chat_cancel = _in_db_thread(chat_cancel)
_chat_confirmation_answer = _in_db_thread(chat_confirmation_answer)
_agent_get = _in_db_thread(agent_get)

# Agent slug → id, learned by this process: lets a connect join the chat's group before its one trip to
# the database (each trip to a database thread costs more than its queries on a busy server). Only a
# hint: the trip checks it, and a wrong one costs a second read.
_agent_id_hints: dict[str, int] = {}


class CanvasConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab's socket on one of its user's chats."""

    # Set in connect(); the turn code reads them.
    user: Any
    agent: Agent
    chat_id: str
    chat_group_name: str = ""
    opened = False  # connect() went through: the socket follows a chat
    counted = False  # counted among this process's sockets (realtime/push.py)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn_tasks: set[asyncio.Task] = set()
        # At most one replay runs per socket, and replays are BUDDY_WS_REPLAY_INTERVAL apart: requests
        # that arrive meanwhile become one more replay.
        self.replay_task: asyncio.Task | None = None
        self.replay_wanted = False
        self.replays_answered = asyncio.Event()  # no replay is waiting to be sent
        self.replays_answered.set()
        self.prompt_bucket = PromptBucket(per_minute=settings.BUDDY_PROMPTS_PER_MINUTE)

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
        await self.accept()
        try:
            chat = ChatRef.of(agent=query.get("agent", [""])[-1], chat_id=query.get("chat_id", [""])[-1])
        except InvalidInput as error:
            await self.send_error(error.code, error.detail)
            await self.close(code=CLOSE_INVALID_QUERY)
            return
        self.chat_id = chat.chat_id
        await self._join(user_group(user.pk))
        # The chat's group is joined before its state is read, so no change between the read and the
        # join is missed; a frame already included in the replay comes after it, with a version the
        # client already has.
        hint = _agent_id_hints.get(chat.agent)
        if hint is not None:
            await self._join_chat_group(hint)
        agent, frames = await _chat_open(user_id=user.pk, chat=chat)
        if agent is None:
            _agent_id_hints.pop(chat.agent, None)
            unknown = UnknownAgent(chat.agent)
            await self.send_error(unknown.code, unknown.detail)
            await self.close(code=CLOSE_UNKNOWN_AGENT)
            return
        self.agent = agent
        if agent.pk != hint:
            _agent_id_hints[chat.agent] = agent.pk
            await self._join_chat_group(agent.pk)
            frames = await _chat_replay(
                user_id=user.pk, agent_id=agent.pk, chat_id=chat.chat_id
            )  # again, after the join
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

    async def send_frame(self, frame: Any) -> None:
        """Send one frame model of realtime.frames (the only kind this consumer builds)."""
        await self.send_json(frame.dump())

    async def _send_all(self, frames: list[Any]) -> None:
        for frame in frames:
            await self.send_frame(frame)

    async def send_error(self, code: ErrorCode, detail: str) -> None:
        await self.send_frame(ErrorFrame(code=code, detail=detail))

    # --- client → server ------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Read one frame. Overridden so that bad input answers an error frame instead of raising,
        which would close the socket (channels #2219)."""
        if not self.opened:
            return  # refused in connect() and closing: nothing to answer
        try:
            frame = client_frame_read(
                text_data, bytes_data, max_bytes=MAX_FRAME_BYTES, max_depth=settings.BUDDY_WS_MAX_DEPTH
            )
            if isinstance(frame, ReplayFrame):
                self.request_replay()
                return
            # Answers keep the order of the requests: what follows a replay comes after it.
            await self.replays_answered.wait()
            await getattr(self, self.frame_handlers[type(frame)])(frame)
        except (FrameError, DomainError) as error:
            await self.replays_answered.wait()
            await self.send_error(error.code, error.detail)
            await asyncio.sleep(REFUSAL_PAUSE_SECONDS)
        except CanvasCommandError as error:
            await self.send_error(error.code, str(error))
            await asyncio.sleep(REFUSAL_PAUSE_SECONDS)

    async def on_prompt(self, frame: PromptFrame) -> None:
        prompt_check(frame.text)  # what is refused as invalid spends no prompt
        self.turn_admit()
        await self.start_turn(frame.text)

    async def on_cancel(self, frame: CancelFrame) -> None:
        await self.cancel_turn()

    def request_replay(self, frame: ReplayFrame | None = None) -> None:
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

    async def on_switch_agent(self, frame: SwitchAgentFrame) -> None:
        slug = ChatRef.of(agent=frame.agent, chat_id=self.chat_id).agent
        agent = await _agent_get(slug=slug)
        if agent is None:
            raise UnknownAgent(slug)
        self.agent = agent
        await self._join_chat_group(agent.pk)
        await self.send_frame(AgentSwitchFrame(agent=AgentOut(id=agent.slug, name=agent.name, avatar=agent.avatar)))
        await self.send_replay()

    async def on_confirmation_response(self, frame: ConfirmationResponseFrame) -> None:
        # Admitted before the answer's transaction (it locks the chat's canvas): a refused answer costs
        # no database work, and leaves the question unanswered for the person to answer again.
        self.turn_admit()
        answer = await _chat_confirmation_answer(
            user_id=self.user.pk,
            agent_id=self.agent.pk,
            chat_id=self.chat_id,
            element_id=frame.id,
            confirmed=frame.confirmed,
        )
        await self.start_turn(answer, kind="confirmation")

    # Frame model → method name (names, so a subclass may override a handler).
    frame_handlers: dict[type[ClientFrame], str] = {
        PromptFrame: "on_prompt",
        CancelFrame: "on_cancel",
        ReplayFrame: "request_replay",  # handled in receive(), before this table
        SwitchAgentFrame: "on_switch_agent",
        ConfirmationResponseFrame: "on_confirmation_response",
    }

    # --- turns ------------------------------------------------------------------------------------

    def turn_admit(self) -> None:
        """Refuse, without the database, a turn that would be refused as turn_running or rate_limited
        when this process can tell (agent.turn.turn_running_here, agent.limits.PromptBucket): a flood
        of prompts or answers costs no database work per frame. What passes is still checked against
        the shared counter and the chat's lease by the turn."""
        if turn_running_here(user_id=self.user.pk, agent_id=self.agent.pk, chat_id=self.chat_id):
            raise TurnRunning()
        self.prompt_bucket.take()

    async def start_turn(self, text: str, kind: str = "typed") -> None:
        """Run `text` (admitted by turn_admit) as a turn of this socket's chat, in a task: the consumer
        handles one event at a time, and its own deltas (group messages) must reach it while the turn
        runs. The turn pushes `user_message`, `tool_use`, `tool_result`, `assistant_delta`,
        `assistant_message` (and a `model_failed` error) to every socket of the chat; refusals
        (turn_running, too_large, …) answer this socket only."""
        task = asyncio.create_task(self._turn(text, kind))
        self.turn_tasks.add(task)
        task.add_done_callback(self.turn_tasks.discard)

    async def _turn(self, text: str, kind: str) -> None:
        try:
            await on_turn_thread(
                chat_prompt,
                user=self.user,
                django_session=self.scope.get("session"),
                chat=ChatRef(agent=self.agent.slug, chat_id=self.chat_id),
                text=text,
                kind=kind,
            )
        except ModelFailed:
            pass  # the turn already told every socket of the chat
        except LoginNoLongerValid as error:
            await self.send_error(error.code, error.detail)
            await self.close(code=CLOSE_LOGGED_OUT)
        except DomainError as error:
            await self.send_error(error.code, error.detail)
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

    async def frames(self, event: dict[str, Any]) -> None:
        """Frames queued together for the group (realtime.push), each sent as it came."""
        for frame in event["frames"]:
            await self.send_json(frame)

    async def user_logout(self, event: dict[str, Any]) -> None:
        await self.close(code=CLOSE_LOGGED_OUT)
