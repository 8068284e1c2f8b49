"""Functions that change a session's canvas (README, "The canvas tools").

Every change is a locked read-modify-write of the session's one `CanvasState` row that bumps
`version` by one. The services return what changed (a CanvasChange) and push nothing: the caller shows
it to the chat's sockets (agent.canvas, on commit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from canvas.elements import (
    TYPE_BY_ADD_COMMAND,
    CanvasChange,
    CanvasCommandError,
    Element,
    check_id,
    element_build,
    element_merge,
    element_params,
    json_type,
    tool_input_check,
)
from canvas.limits import MAX_ELEMENT_BYTES, MAX_ELEMENTS, MAX_SERVER_ELEMENT_BYTES, RESERVED_ID_PREFIX
from canvas.models import CanvasState
from canvas.tools import CANVAS_TOOL_NAMES, ModeIn, NotificationIn, RemoveIn, ThemeIn, UpdateIn
from conversations.models import Session

__all__ = [
    "CanvasChange",
    "CanvasCommandError",
    "canvas_apply",
    "canvas_lock",
    "canvas_reduce",
    "confirmation_answer",
    "server_confirmation_show",
]


@dataclass(frozen=True)
class _Outcome:
    params: dict[str, Any]
    result: str


def _state_for_update(session: Session, *, create: bool = True) -> CanvasState | None:
    """The session's canvas row, locked until the transaction ends.

    Caller must be inside `transaction.atomic()`. PostgreSQL: SELECT … FOR UPDATE. SQLite ignores
    FOR UPDATE, but its IMMEDIATE transactions (settings) already hold the database's write lock.
    The row is created on first use; INSERT … ON CONFLICT DO NOTHING lets two first writers race
    without an IntegrityError, and the second one then waits on the first one's lock.
    """
    locked = CanvasState.objects.select_for_update()
    state = locked.filter(session_id=session.pk).first()
    if state is None and create:
        CanvasState.objects.bulk_create([CanvasState(session_id=session.pk)], ignore_conflicts=True)
        state = locked.get(session_id=session.pk)
    return state


def _find(elements: list[Element], element_id: str) -> int | None:
    for index, element in enumerate(elements):
        if element["id"] == element_id:
            return index
    return None


def _counted(count: int) -> str:
    return f"{count} element{'' if count == 1 else 's'} on the canvas"


def _add(command: str, max_bytes: int = MAX_ELEMENT_BYTES) -> Callable[[CanvasState, dict[str, Any]], _Outcome]:
    element_type = TYPE_BY_ADD_COMMAND[command]

    def add(state: CanvasState, params: dict[str, Any]) -> _Outcome:
        element = element_build(element_type, params, max_bytes)
        elements: list[Element] = list(state.elements)
        index = _find(elements, element["id"])
        if index is not None:
            elements[index] = element  # replace in place: the element keeps its position
            verb = "Replaced"
        else:
            if len(elements) >= MAX_ELEMENTS:
                raise CanvasCommandError(
                    f"the canvas already holds {len(elements)} elements, the most it can: remove one "
                    "(canvas_remove_element), reuse an id to replace one, or clear the canvas first",
                    code="too_many_elements",
                )
            elements.append(element)
            verb = "Added"
        state.elements = elements
        state.mode = "content"
        return _Outcome(
            element_params(element),
            f"{verb} {element_type.name} `{element['id']}` ({_counted(len(elements))}).",
        )

    return add


def _update(state: CanvasState, params: dict[str, Any]) -> _Outcome:
    tool_input_check(UpdateIn, params)
    element_id = params["id"]
    elements: list[Element] = list(state.elements)
    index = _find(elements, element_id)
    if index is None:
        raise CanvasCommandError(_unknown_id_message(element_id, elements), code="unknown_element")
    if len(params) == 1:
        raise CanvasCommandError("canvas_update_card needs at least one field to change besides `id`")
    elements[index] = element_merge(elements[index], params)
    state.elements = elements
    changed = ", ".join(name for name in params if name != "id")
    # The full element, so a client replaces it by id whatever fields it had.
    return _Outcome(element_params(elements[index]), f"Updated {elements[index]['type']} `{element_id}`: {changed}.")


def _remove(state: CanvasState, params: dict[str, Any]) -> _Outcome:
    tool_input_check(RemoveIn, params)
    element_id = params["id"]
    elements: list[Element] = list(state.elements)
    index = _find(elements, element_id)
    if index is None:
        raise CanvasCommandError(_unknown_id_message(element_id, elements), code="unknown_element")
    removed = elements.pop(index)
    state.elements = elements
    return _Outcome({"id": element_id}, f"Removed {removed['type']} `{element_id}` ({_counted(len(elements))}).")


def _reserved(element_id: Any) -> bool:
    return isinstance(element_id, str) and element_id.lower().startswith(RESERVED_ID_PREFIX)


def _set_mode(state: CanvasState, params: dict[str, Any]) -> _Outcome:
    """`clear` removes every element but the server's questions still waiting for the user's answer:
    the model cannot make such a question vanish. The frame names them (`keep`) when there are any."""
    tool_input_check(ModeIn, params)
    mode = params["mode"]
    state.mode = mode
    if mode == "clear":
        kept = [e for e in state.elements if _reserved(e["id"]) and not e.get("answered")]
        removed = len(state.elements) - len(kept)
        state.elements = kept
        result = f"Cleared the canvas ({removed} element{'' if removed == 1 else 's'} removed)."
        if not kept:
            return _Outcome({"mode": "clear"}, result)
        ids = [e["id"] for e in kept]
        return _Outcome(
            {"mode": "clear", "keep": ids},
            f"{result} Kept {', '.join(f'`{i}`' for i in ids)}: a question to the user about their memory "
            "stays until they answer it.",
        )
    return _Outcome({"mode": mode}, "The canvas is in content mode.")


def _set_theme(state: CanvasState, params: dict[str, Any]) -> _Outcome:
    tool_input_check(ThemeIn, params)
    theme = params["theme"].strip()
    state.theme = theme
    return _Outcome({"theme": theme}, f"Theme set to `{theme}`." if theme else "Theme reset to the default.")


def _notify(state: CanvasState, params: dict[str, Any]) -> _Outcome:
    """Never stored: only the version moves, so every frame a client sees has its own version."""
    tool_input_check(NotificationIn, params)
    message = params["message"]
    level = params.get("level") or "info"
    return _Outcome({"message": message, "level": level}, "Notification shown to the user's open screens.")


def _unknown_id_message(element_id: str, elements: list[Element]) -> str:
    known = ", ".join(element["id"] for element in elements[:MAX_ELEMENTS])
    return f"no element `{element_id}` on the canvas" + (f"; its ids are: {known}" if known else "; it is empty")


_COMMANDS: dict[str, Callable[[CanvasState, dict[str, Any]], _Outcome]] = {
    **{command: _add(command) for command in TYPE_BY_ADD_COMMAND},
    "canvas_update_card": _update,
    "canvas_remove_element": _remove,
    "canvas_set_mode": _set_mode,
    "canvas_set_theme": _set_theme,
    "canvas_show_notification": _notify,
}
assert set(_COMMANDS) == CANVAS_TOOL_NAMES, "every canvas tool needs a handler"


def _commit(session: Session, state: CanvasState, command: str, outcome: _Outcome) -> CanvasChange:
    state.version += 1
    state.updated_at = timezone.now()
    state.save(update_fields=["elements", "mode", "theme", "version", "updated_at"])
    return CanvasChange(command=command, params=outcome.params, version=state.version, result=outcome.result)


def canvas_apply(*, session: Session, command: str, params: dict[str, Any]) -> CanvasChange:
    """Apply one canvas command (a canvas tool's name and input) to the session's canvas.

    Raises CanvasCommandError, with the canvas untouched, when the command or its input is invalid;
    its message is meant for an `is_error` tool_result. Runs in its own atomic block (a savepoint when
    the caller already holds a transaction, so a refusal never spoils the caller's transaction).
    """
    handler = _handler(command, params)
    with transaction.atomic():
        state = _state_for_update(session)
        assert state is not None
        outcome = handler(state, params)
        return _commit(session, state, command, outcome)


def canvas_reduce(state: CanvasState, *, command: str, params: dict[str, Any]) -> None:
    """Apply one command to `state` in memory only: no lock, no save, no version, no frame.

    The pure core of `canvas_apply`, for audits that rebuild a canvas from its archived tool calls
    (bench/soak.py). Raises CanvasCommandError, with `state` untouched, exactly when canvas_apply would.
    """
    _handler(command, params)(state, params)


def _handler(command: str, params: Any) -> Callable[[CanvasState, dict[str, Any]], _Outcome]:
    handler = _COMMANDS.get(command)
    if handler is None:
        raise CanvasCommandError(
            f"unknown canvas command `{command}`; the canvas tools are: {', '.join(sorted(CANVAS_TOOL_NAMES))}",
            code="unknown_command",
        )
    if not isinstance(params, dict):
        raise CanvasCommandError(f"the input of {command} must be an object, not {json_type(params)}")
    if _reserved(params.get("id")):
        raise CanvasCommandError(
            f"`{params['id']}`: ids starting with `{RESERVED_ID_PREFIX}` are the server's questions to the user "
            "about their memory; only the user answers them, and no canvas tool may add, change or remove one. "
            "Use another id.",
            code="reserved_id",
        )
    return handler


def server_confirmation_show(*, session: Session, params: dict[str, Any]) -> CanvasChange:
    """Show a confirmation the server itself asks (its text is the server's, its id in the reserved
    space that canvas_apply refuses); the user answers it like any other. Raises CanvasCommandError."""
    if not _reserved(params.get("id")):
        raise CanvasCommandError(f"the server's questions have ids starting with `{RESERVED_ID_PREFIX}`")
    with transaction.atomic():
        state = _state_for_update(session)
        assert state is not None
        outcome = _add("canvas_show_confirmation", MAX_SERVER_ELEMENT_BYTES)(state, params)
        return _commit(session, state, "canvas_show_confirmation", outcome)


def canvas_lock(*, session: Session) -> None:
    """Lock the session's canvas row, if it has one, until the transaction ends. A write of the chat
    that takes other locks too (a tool round, a confirmation's answer) takes this one first, so two such
    writes never wait on each other's locks in opposite orders. Caller is inside atomic()."""
    _state_for_update(session, create=False)


def confirmation_answer(
    *, session: Session, element_id: str, confirmed: bool, outcome: str | None = None
) -> CanvasChange:
    """Mark the confirmation `element_id` answered (`answered`: "confirmed" or "declined"), with the
    `outcome` of what the answer did, when the caller has one to show (a server's question).

    The change is a `canvas_update_card` carrying the whole element. Running the answer as a turn
    (`[confirmation ID: confirmed|declined]`) is the caller's business. Raises CanvasCommandError with
    code unknown_element, not_a_confirmation or already_answered.
    """
    if not isinstance(confirmed, bool):
        raise CanvasCommandError("`confirmed` must be true or false")
    check_id(element_id)
    with transaction.atomic():
        state = _state_for_update(session, create=False)
        elements: list[Element] = list(state.elements) if state is not None else []
        index = _find(elements, element_id)
        if state is None or index is None:
            raise CanvasCommandError(f"no element `{element_id}` on the canvas", code="unknown_element")
        element = dict(elements[index])
        if element["type"] != "confirmation":
            raise CanvasCommandError(
                f"`{element_id}` is a {element['type']}, not a confirmation", code="not_a_confirmation"
            )
        if element.get("answered"):
            raise CanvasCommandError(
                f"confirmation `{element_id}` was already answered ({element['answered']})",
                code="already_answered",
            )
        element["answered"] = "confirmed" if confirmed else "declined"
        if outcome:
            element["outcome"] = outcome
        elements[index] = element
        state.elements = elements
        marked = _Outcome(element_params(element), f"Confirmation `{element_id}` {element['answered']}.")
        return _commit(session, state, "canvas_update_card", marked)
