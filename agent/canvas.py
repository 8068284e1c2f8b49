"""The canvas as the agent changes and shows it: canvas services return what changed, and this module
turns each change into its frame (realtime.frames) and pushes it to the chat's sockets after the
transaction commits — a change that is rolled back is never seen (README: WebSocket)."""

from __future__ import annotations

from typing import Any

from canvas.elements import CanvasChange
from canvas.selectors import canvas_replay
from canvas.services import canvas_apply, confirmation_answer, server_confirmation_show
from conversations.models import Session
from realtime.frames import CanvasCommandFrame
from realtime.push import push_frame_on_commit


def canvas_frame(change: CanvasChange) -> CanvasCommandFrame:
    return CanvasCommandFrame(command=change.command, params=change.params, version=change.version)


def canvas_change_push(*, session: Session, change: CanvasChange) -> None:
    """Push `change` when the surrounding transaction commits (at once outside one). Call it inside the
    atomic block that made the change, so that a rollback of that block drops the frame too."""
    push_frame_on_commit(session, canvas_frame(change))


def canvas_command_run(*, session: Session, command: str, params: dict[str, Any]) -> CanvasChange:
    """canvas_apply, then its frame to the chat's sockets on commit. Raises CanvasCommandError."""
    change = canvas_apply(session=session, command=command, params=params)
    canvas_change_push(session=session, change=change)
    return change


def canvas_server_confirmation_show(*, session: Session, params: dict[str, Any]) -> CanvasChange:
    """server_confirmation_show (a question about the user's memory, in the reserved id space), then its
    frame on commit. Raises CanvasCommandError."""
    change = server_confirmation_show(session=session, params=params)
    canvas_change_push(session=session, change=change)
    return change


def canvas_confirmation_answer(
    *, session: Session, element_id: str, confirmed: bool, outcome: str | None = None
) -> CanvasChange:
    """confirmation_answer (with the server's `outcome`, if any), then its frame on commit. Raises
    CanvasCommandError."""
    change = confirmation_answer(session=session, element_id=element_id, confirmed=confirmed, outcome=outcome)
    canvas_change_push(session=session, change=change)
    return change


def canvas_replay_frames(*, session: Session | None) -> list[CanvasCommandFrame]:
    """The frames that rebuild the chat's canvas on a client (empty canvas for `session=None`)."""
    return [canvas_frame(change) for change in canvas_replay(session=session)]
