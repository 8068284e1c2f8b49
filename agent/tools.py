"""The tools the model may call, and running one round of them (README: the canvas tools, memory tools and schedules).

Read-only tools (memory) run first; then the canvas commands and the archiving of the round's
`tool_result` message commit in one transaction, so a canvas change never exists without its result;
each change reaches the chat's sockets once that transaction commits (agent.canvas).
Invalid input never raises: it becomes an `is_error` result that says why, so the model can correct
itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anthropic.lib.tools import ToolError
from django.conf import settings
from django.db import transaction

from agent.canvas import canvas_command_run, canvas_server_confirmation_show
from agent.schedules import SCHEDULE_TOOL, ScheduleError, schedule_from_tool
from canvas.limits import RESERVED_ID_PREFIX
from canvas.services import CanvasCommandError, canvas_lock
from canvas.tools import CANVAS_TOOL_NAMES, CANVAS_TOOLS
from conversations.models import Message, Session
from conversations.services import message_append
from memory.notes import tool as notes_tool
from memory.notes.paths import NoteError
from memory.notes.proposals import ELEMENT_ID_PREFIX
from memory.tools import MEMORY_TOOL_DEFINITIONS, MemoryToolError, memory_tool_run

MEMORY_TOOLS = {"search_history", "get_messages_by_date", "get_extended_context"}
NOT_AN_OBJECT = "The tool input must be a JSON object."  # the answer to a call whose input is not one
assert ELEMENT_ID_PREFIX.startswith(RESERVED_ID_PREFIX), "the memory's questions need ids no canvas tool may touch"


@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False


def tool_definitions() -> list[dict[str, Any]]:
    return [*CANVAS_TOOLS, *MEMORY_TOOL_DEFINITIONS, dict(notes_tool.MEMORY_TOOL), SCHEDULE_TOOL]


def _run_read_only(session: Session, name: str, tool_input: dict[str, Any]) -> ToolOutcome:
    try:
        return ToolOutcome(memory_tool_run(session=session, name=name, tool_input=tool_input))
    except MemoryToolError as exc:
        return ToolOutcome(str(exc), is_error=True)


def _run_notes(session: Session, tool_input: dict[str, Any], source: Message | None) -> ToolOutcome:
    """The memory tool over the notes; a profile write asks the user with the server's confirmation."""

    def ask_user(params: dict[str, Any]) -> None:
        try:
            canvas_server_confirmation_show(session=session, params=params)
        except CanvasCommandError as exc:
            raise NoteError(f"could not ask the user on the canvas ({exc})") from exc

    try:
        with transaction.atomic():  # a savepoint: a refused command leaves nothing behind
            text = notes_tool.memory_tool_run(session=session, source=source, tool_input=tool_input, ask_user=ask_user)
    except ToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    return ToolOutcome(text)


def _run_writing(session: Session, name: str, tool_input: dict[str, Any], source: Message | None) -> ToolOutcome:
    if name == notes_tool.MEMORY_TOOL_NAME:
        return _run_notes(session, tool_input, source)

    if name in CANVAS_TOOL_NAMES:
        try:
            with transaction.atomic():  # a savepoint: one failed command leaves the others standing
                change = canvas_command_run(session=session, command=name, params=tool_input)
        except CanvasCommandError as exc:
            return ToolOutcome(f"{name} failed, nothing changed: {exc}", is_error=True)
        return ToolOutcome(f"{name}: {change.result} Canvas version {change.version}.")
    if name == "schedule_prompt":
        try:
            return ToolOutcome(schedule_from_tool(session=session, tool_input=tool_input))
        except ScheduleError as exc:
            return ToolOutcome(f"schedule_prompt failed: {exc}", is_error=True)
    known = ", ".join(sorted(tool["name"] for tool in tool_definitions()))
    return ToolOutcome(f"Unknown tool {name!r}. The tools are: {known}.", is_error=True)


def tool_round_run(
    *,
    session: Session,
    tool_uses: list[dict[str, Any]],
    source: Message | None = None,
    refused: Mapping[str, str] | None = None,
) -> Message:
    """Run the tool_uses of the assistant message `source`, at most BUDDY_MAX_TOOL_CALLS of them (the writes
    share one transaction, and on SQLite one write lock: a response of a thousand calls must not hold
    it for seconds); archive and return the tool_result message, which answers every tool_use. The
    calls `refused` names are answered with its error text instead of being run."""
    outcomes = {tool_id: ToolOutcome(text, is_error=True) for tool_id, text in (refused or {}).items()}
    limit = settings.BUDDY_MAX_TOOL_CALLS
    for block in [block for block in tool_uses[limit:] if block["id"] not in outcomes]:
        outcomes[block["id"]] = ToolOutcome(
            f"Not run: one response may make at most {limit} tool calls and this one made {len(tool_uses)}. "
            "Make the calls that were not run in your next response.",
            is_error=True,
        )
    for block in tool_uses[:limit]:
        if block["id"] in outcomes:
            continue
        if not isinstance(block.get("input"), dict):
            outcomes[block["id"]] = ToolOutcome(NOT_AN_OBJECT, is_error=True)
        elif block["name"] in MEMORY_TOOLS:
            outcomes[block["id"]] = _run_read_only(session, block["name"], block["input"])
    with transaction.atomic():
        canvas_lock(session=session)
        for block in tool_uses:
            if block["id"] not in outcomes:
                outcomes[block["id"]] = _run_writing(session, block["name"], block["input"], source)
        results = [tool_result_block(block["id"], outcomes[block["id"]]) for block in tool_uses]
        return message_append(session=session, role="user", content=results)


def tool_result_block(tool_use_id: str, outcome: ToolOutcome) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": outcome.text or "(empty)"}
    if outcome.is_error:
        block["is_error"] = True
    return block
