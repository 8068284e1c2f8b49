"""Functions that read a session's canvas. None of them creates anything."""

from __future__ import annotations

import json
from typing import Any

from canvas.elements import ELEMENT_TYPES, CanvasChange, Element, element_params
from canvas.models import CanvasState
from conversations.models import Session
from conversations.prepared import PreparedQuery

SNAPSHOT_HEADING = "What's currently on the canvas:"
SNAPSHOT_CONTENT_CHARS = 150


_STORED = PreparedQuery(lambda session_id: CanvasState.objects.filter(session_id=session_id)[:1], session_id=int)


def _stored(session: Session | None) -> CanvasState | None:
    if session is None or session.pk is None:
        return None
    found = _STORED.rows(session_id=session.pk)
    return found[0] if found else None


def canvas_state(*, session: Session | None) -> dict[str, Any]:
    """`{"elements", "mode", "theme", "version"}`; an empty canvas at version 0 when nothing is stored."""
    state = _stored(session)
    if state is None:
        return {"elements": [], "mode": "content", "theme": "", "version": 0}
    return {"elements": state.elements, "mode": state.mode, "theme": state.theme, "version": state.version}


def canvas_replay(*, session: Session | None) -> list[CanvasChange]:
    """The commands that rebuild the canvas on a client (README: WebSocket), each at the canvas's version.

    A clear, one add command per element in order (its params are the element's fields), then the theme
    when one is set. `session=None` (a chat that does not exist) replays empty.
    """
    state = canvas_state(session=session)
    version = state["version"]
    replay = [CanvasChange(command="canvas_set_mode", params={"mode": "clear"}, version=version)]
    replay.extend(
        CanvasChange(
            command=ELEMENT_TYPES[element["type"]].add_command, params=element_params(element), version=version
        )
        for element in state["elements"]
    )
    if state["theme"]:
        replay.append(CanvasChange(command="canvas_set_theme", params={"theme": state["theme"]}, version=version))
    return replay


def canvas_snapshot_text(*, session: Session | None) -> str:
    """The canvas part of the model's context block; "" when the canvas is empty.

    A heading, then one line per element: type, id, title and at most 150 characters of its content.
    """
    elements = canvas_state(session=session)["elements"]
    if not elements:
        return ""
    return "\n".join([SNAPSHOT_HEADING, *(_snapshot_line(element) for element in elements)])


def _snapshot_line(element: Element) -> str:
    title = element.get("title")
    line = f"- {element['type']} `{element['id']}`"
    if title:
        line += f" titled {json.dumps(_one_line(title), ensure_ascii=False)}"
    content = _one_line(element_content_summary(element))
    if len(content) > SNAPSHOT_CONTENT_CHARS:
        content = content[: SNAPSHOT_CONTENT_CHARS - 1] + "…"
    return f"{line}: {content}" if content else line


def _one_line(text: str) -> str:
    return " ".join(text.split())


def element_content_summary(element: Element) -> str:
    kind = element["type"]
    if kind == "card":
        return element.get("body", "")
    if kind == "text":
        return element["content"]
    if kind == "chart":
        series = "; ".join(
            f"{item['name']}: {', '.join(_short(value) for value in item['values'])}" for item in element["series"]
        )
        labels = ", ".join(_short(label) for label in element["labels"])
        return f"{element['chart_type']} chart of {labels} — {series}"
    if kind == "table":
        rows = element["rows"]
        return f"{len(rows)} row{'' if len(rows) == 1 else 's'} × {', '.join(element['columns'])}"
    if kind == "media":
        return f"{element['media_type']} {element['url']}"
    if kind == "confirmation":
        answer = element.get("answered")
        status = f"(answered: {answer})" if answer else "(awaiting the user's answer)"
        return f"{status} {element['message']}"
    return ""


def _short(value: Any) -> str:
    return "–" if value is None else str(value)
