"""The canvas tools given to the model (README, "The canvas tools"), as Anthropic tool definitions.

The schemas mirror what `canvas.services.canvas_apply` accepts, so a model that follows them is never
refused; the service still validates everything (a model may not follow them), and its error says why.
"""

from __future__ import annotations

from typing import Any

from canvas.limits import (
    CHART_TYPES,
    ELEMENT_ID_PATTERN,
    MAX_BUTTON_LABEL_CHARS,
    MAX_ELEMENT_BYTES,
    MAX_ELEMENTS,
    MAX_NOTIFICATION_CHARS,
    MAX_THEME_CHARS,
    MAX_TITLE_CHARS,
    MEDIA_TYPES,
    NOTIFICATION_LEVELS,
)

_ID = {
    "type": "string",
    "pattern": ELEMENT_ID_PATTERN,
    "minLength": 1,
    "maxLength": 64,
    "description": "Your name for the element: 1–64 characters of A-Z a-z 0-9 _ . : -. "
    "Reuse an id to replace that element in place.",
}
_TITLE = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_TITLE_CHARS,
    "description": "Heading of the element.",
}
_OPTIONAL_TITLE = {**_TITLE, "description": "Optional heading of the element."}
_CELL = {"type": ["string", "number", "boolean", "null"]}
_LABEL = {"type": ["string", "number"]}
_SERIES = {
    "type": "array",
    "minItems": 1,
    "description": "One or more data series; each has one value per label, in label order.",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "Legend name of the series."},
            "values": {"type": "array", "items": {"type": ["number", "null"]}},
        },
        "required": ["name", "values"],
        "additionalProperties": False,
    },
}
_LIMITS = (
    f" At most {MAX_ELEMENTS} elements are on the canvas and one element is at most "
    f"{MAX_ELEMENT_BYTES // 1024} KiB of JSON."
)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


CANVAS_TOOLS: list[dict[str, Any]] = [
    _tool(
        "canvas_add_card",
        "Put a card on the canvas the user sees beside the chat: a title with an optional short body of "
        "plain text (never HTML). Use cards for key facts, summaries, plans and to-dos the user should "
        "keep in view. An existing id is replaced in place." + _LIMITS,
        {
            "id": _ID,
            "title": _TITLE,
            "body": {"type": "string", "description": "Plain text under the title."},
        },
        ["id", "title"],
    ),
    _tool(
        "canvas_show_text",
        "Show a longer block of plain text on the canvas (notes, a draft, code or a poem), with an "
        "optional title. Line breaks are kept; it is never interpreted as HTML. An existing id is replaced "
        "in place." + _LIMITS,
        {"id": _ID, "content": {"type": "string", "minLength": 1}, "title": _OPTIONAL_TITLE},
        ["id", "content"],
    ),
    _tool(
        "canvas_show_chart",
        "Draw a line, bar or pie chart on the canvas. `labels` are the x-axis categories (or pie slices); "
        "every series gives exactly one number per label, in the same order. An existing id is replaced "
        "in place." + _LIMITS,
        {
            "id": _ID,
            "title": _TITLE,
            "chart_type": {"type": "string", "enum": list(CHART_TYPES)},
            "labels": {"type": "array", "minItems": 1, "items": _LABEL},
            "series": _SERIES,
        },
        ["id", "title", "chart_type", "labels", "series"],
    ),
    _tool(
        "canvas_show_table",
        "Show a table on the canvas: column headings and rows, each row holding exactly one cell per column "
        "(text, a number, true/false or null). An existing id is replaced in place." + _LIMITS,
        {
            "id": _ID,
            "title": _TITLE,
            "columns": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "array", "items": _CELL}},
        },
        ["id", "title", "columns", "rows"],
    ),
    _tool(
        "canvas_play_media",
        "Show an image or play an audio or video file on the canvas, from a path on this server starting "
        "with '/' or an https URL on a media host the server allows (others are refused, with the list). "
        "An existing id is replaced in place." + _LIMITS,
        {
            "id": _ID,
            "url": {"type": "string", "minLength": 1, "description": "A /path, or https:// on an allowed host."},
            "media_type": {"type": "string", "enum": list(MEDIA_TYPES)},
            "title": _OPTIONAL_TITLE,
        },
        ["id", "url", "media_type"],
    ),
    _tool(
        "canvas_show_confirmation",
        "Ask the user to confirm or decline something with two buttons on the canvas. Their answer comes "
        "back to you later as a new user message `[confirmation ID: confirmed]` or "
        "`[confirmation ID: declined]`; do not assume the answer before it arrives. An existing id is "
        "replaced in place (and can be answered again)." + _LIMITS,
        {
            "id": _ID,
            "title": _TITLE,
            "message": {"type": "string", "minLength": 1, "description": "The question, in plain text."},
            "confirm_label": {"type": "string", "minLength": 1, "maxLength": MAX_BUTTON_LABEL_CHARS},
            "cancel_label": {"type": "string", "minLength": 1, "maxLength": MAX_BUTTON_LABEL_CHARS},
        },
        ["id", "title", "message"],
    ),
    _tool(
        "canvas_update_card",
        "Change some fields of an element already on the canvas (a card or any other type), keeping the "
        "rest and its position. Give its id and only the fields to change; they must be fields of that "
        "element's type (for example `body` of a card, `series` of a chart, `rows` of a table). Set an "
        "optional field to null to remove it. The type of an element cannot change: add it again instead.",
        {
            "id": {**_ID, "description": "Id of the element to change."},
            "title": {"type": ["string", "null"]},
            "body": {"type": ["string", "null"]},
            "content": {"type": "string"},
            "chart_type": {"type": "string", "enum": list(CHART_TYPES)},
            "labels": {"type": "array", "items": _LABEL},
            "series": _SERIES,
            "columns": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "array", "items": _CELL}},
            "url": {"type": "string"},
            "media_type": {"type": "string", "enum": list(MEDIA_TYPES)},
            "message": {"type": "string"},
            "confirm_label": {"type": ["string", "null"]},
            "cancel_label": {"type": ["string", "null"]},
        },
        ["id"],
    ),
    _tool(
        "canvas_remove_element",
        "Remove one element from the canvas by its id.",
        {"id": {**_ID, "description": "Id of the element to remove."}},
        ["id"],
    ),
    _tool(
        "canvas_set_mode",
        "`clear` removes every element from the canvas (start over); `content` is the normal mode.",
        {"mode": {"type": "string", "enum": ["content", "clear"]}},
        ["mode"],
    ),
    _tool(
        "canvas_set_theme",
        "Set the canvas theme, for example `light` or `dark`; an empty string goes back to the default. "
        "It is remembered for this conversation.",
        {"theme": {"type": "string", "maxLength": MAX_THEME_CHARS}},
        ["theme"],
    ),
    _tool(
        "canvas_show_notification",
        "Pop up a short notification for the user right now. It is shown once and not kept on the canvas, "
        "so use a card for anything the user should still see later.",
        {
            "message": {"type": "string", "minLength": 1, "maxLength": MAX_NOTIFICATION_CHARS},
            "level": {"type": "string", "enum": list(NOTIFICATION_LEVELS), "description": "Default: info."},
        },
        ["message"],
    ),
]

CANVAS_TOOL_NAMES: frozenset[str] = frozenset(tool["name"] for tool in CANVAS_TOOLS)
