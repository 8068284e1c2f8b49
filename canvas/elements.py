"""What a canvas element is: its type, its fields and their rules (README, "The canvas tools").

Pure functions on plain dicts, no database: `canvas.services` uses them under the row lock, and
anything else (a test, an import) can check an element the same way.
An element is stored as `{"type": ..., "id": ..., <fields>}`; the fields are the tool's input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from canvas.limits import (
    CHART_TYPES,
    ELEMENT_ID_RE,
    MAX_BUTTON_LABEL_CHARS,
    MAX_ELEMENT_BYTES,
    MAX_TITLE_CHARS,
    MEDIA_TYPES,
)

Element = dict[str, Any]


class CanvasCommandError(ValueError):
    """A canvas command refused; the message says why in words the model (or a person) can act on.

    `code` names the kind of refusal for WebSocket `error` frames.
    """

    def __init__(self, message: str, *, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.code = code


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_id(value: Any, field: str = "id") -> str:
    if not isinstance(value, str):
        raise CanvasCommandError(f"`{field}` must be a string, not {json_type(value)}")
    if not ELEMENT_ID_RE.match(value):
        raise CanvasCommandError(
            f"`{field}` {value[:80]!r} is not a valid element id: use 1–64 characters of A-Z a-z 0-9 _ . : -"
        )
    return value


def _string(field: str, value: Any, *, max_chars: int | None = None, allow_blank: bool = False) -> None:
    if not isinstance(value, str):
        raise CanvasCommandError(f"`{field}` must be a string, not {json_type(value)}")
    if not allow_blank and not value.strip():
        raise CanvasCommandError(f"`{field}` must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise CanvasCommandError(f"`{field}` is {len(value)} characters; at most {max_chars} are allowed")


def _title(field: str, value: Any) -> None:
    _string(field, value, max_chars=MAX_TITLE_CHARS)


def _text(field: str, value: Any) -> None:
    _string(field, value)


def _blank_text(field: str, value: Any) -> None:
    _string(field, value, allow_blank=True)


def _button_label(field: str, value: Any) -> None:
    _string(field, value, max_chars=MAX_BUTTON_LABEL_CHARS)


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], None]:
    def check(field: str, value: Any) -> None:
        if value not in options or not isinstance(value, str):
            raise CanvasCommandError(f"`{field}` must be one of {', '.join(options)}; got {json.dumps(value)[:80]}")

    return check


# Browsers read a backslash as a slash and drop tabs and newlines in URLs, so `/\\evil.example/x` or
# `/<tab>/evil.example/x` would load from another site: a same-site path starts with one '/' that a
# second '/' or '\\' does not follow, and holds no backslash, whitespace or control character.
_SAME_SITE_PATH_RE = re.compile(r"/(?![/\\])[^\\\s\x00-\x1f\x7f]*")
_UNSAFE_URL_CHARACTER_RE = re.compile(r"[\\\s\x00-\x1f\x7f]")


def media_host_allowed(url: str) -> bool:
    """An https URL on one of BUDDY_MEDIA_HOSTS (an entry may name a port; 443 is the default)."""
    if _UNSAFE_URL_CHARACTER_RE.search(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme != "https" or not parts.hostname or "@" in parts.netloc:
        return False
    host = parts.hostname if port in (None, 443) else f"{parts.hostname}:{port}"
    return host in settings.BUDDY_MEDIA_HOSTS


def _url(field: str, value: Any) -> None:
    _string(field, value)
    if _SAME_SITE_PATH_RE.fullmatch(value) or media_host_allowed(value):
        return
    hosts = ", ".join(settings.BUDDY_MEDIA_HOSTS) or "none are configured"
    raise CanvasCommandError(
        f"`{field}` must be a path on this site starting with a single '/', or an https:// URL on one of the "
        f"media hosts the server allows ({hosts}); {value[:80]!r} is neither"
    )


def _labels(field: str, value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise CanvasCommandError(f"`{field}` must be a non-empty array of strings or numbers")
    for index, label in enumerate(value):
        if not (isinstance(label, str) or _is_number(label)):
            raise CanvasCommandError(f"`{field}[{index}]` must be a string or a number, not {json_type(label)}")


def _series(field: str, value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise CanvasCommandError(f"`{field}` must be a non-empty array of {{name, values}} objects")
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(item, dict):
            raise CanvasCommandError(f"`{where}` must be an object {{name, values}}, not {json_type(item)}")
        extra = sorted(set(item) - {"name", "values"})
        if extra:
            raise CanvasCommandError(f"`{where}` has unexpected fields {', '.join(extra)}; a series has name, values")
        if "name" not in item or "values" not in item:
            raise CanvasCommandError(f"`{where}` needs both `name` and `values`")
        _string(f"{where}.name", item["name"], max_chars=MAX_TITLE_CHARS)
        values = item["values"]
        if not isinstance(values, list):
            raise CanvasCommandError(f"`{where}.values` must be an array of numbers, not {json_type(values)}")
        for position, number in enumerate(values):
            if number is not None and not _is_number(number):
                raise CanvasCommandError(
                    f"`{where}.values[{position}]` must be a number (or null), not {json_type(number)}"
                )


def _columns(field: str, value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise CanvasCommandError(f"`{field}` must be a non-empty array of strings")
    for index, column in enumerate(value):
        if not isinstance(column, str):
            raise CanvasCommandError(f"`{field}[{index}]` must be a string, not {json_type(column)}")


def _rows(field: str, value: Any) -> None:
    if not isinstance(value, list):
        raise CanvasCommandError(f"`{field}` must be an array of rows (arrays of cells), not {json_type(value)}")
    for index, row in enumerate(value):
        if not isinstance(row, list):
            raise CanvasCommandError(f"`{field}[{index}]` must be an array of cells, not {json_type(row)}")
        for position, cell in enumerate(row):
            if not (cell is None or isinstance(cell, str | bool) or _is_number(cell)):
                raise CanvasCommandError(
                    f"`{field}[{index}][{position}]` must be a string, number, boolean or null, not {json_type(cell)}"
                )


def _chart_consistent(element: Element) -> None:
    count = len(element["labels"])
    for index, series in enumerate(element["series"]):
        if len(series["values"]) != count:
            raise CanvasCommandError(
                f"`series[{index}]` ({series['name']!r}) has {len(series['values'])} values but there are "
                f"{count} labels: give exactly one value per label"
            )


def _table_consistent(element: Element) -> None:
    count = len(element["columns"])
    for index, row in enumerate(element["rows"]):
        if len(row) != count:
            raise CanvasCommandError(
                f"`rows[{index}]` has {len(row)} cells but there are {count} columns: give one cell per column"
            )


@dataclass(frozen=True)
class FieldRule:
    check: Callable[[str, Any], None]
    required: bool


@dataclass(frozen=True)
class ElementType:
    name: str
    add_command: str
    fields: dict[str, FieldRule]
    consistent: Callable[[Element], None] | None = None
    # Written by the server, never by a command (a confirmation's answer).
    server_fields: tuple[str, ...] = ()


ELEMENT_TYPES: dict[str, ElementType] = {
    element_type.name: element_type
    for element_type in (
        ElementType(
            "card",
            "canvas_add_card",
            {"title": FieldRule(_title, True), "body": FieldRule(_blank_text, False)},
        ),
        ElementType("text", "canvas_show_text", {"content": FieldRule(_text, True), "title": FieldRule(_title, False)}),
        ElementType(
            "chart",
            "canvas_show_chart",
            {
                "title": FieldRule(_title, True),
                "chart_type": FieldRule(_choice(CHART_TYPES), True),
                "labels": FieldRule(_labels, True),
                "series": FieldRule(_series, True),
            },
            consistent=_chart_consistent,
        ),
        ElementType(
            "table",
            "canvas_show_table",
            {
                "title": FieldRule(_title, True),
                "columns": FieldRule(_columns, True),
                "rows": FieldRule(_rows, True),
            },
            consistent=_table_consistent,
        ),
        ElementType(
            "media",
            "canvas_play_media",
            {
                "url": FieldRule(_url, True),
                "media_type": FieldRule(_choice(MEDIA_TYPES), True),
                "title": FieldRule(_title, False),
            },
        ),
        ElementType(
            "confirmation",
            "canvas_show_confirmation",
            {
                "title": FieldRule(_title, True),
                "message": FieldRule(_text, True),
                "confirm_label": FieldRule(_button_label, False),
                "cancel_label": FieldRule(_button_label, False),
            },
            server_fields=("answered",),
        ),
    )
}
TYPE_BY_ADD_COMMAND: dict[str, ElementType] = {kind.add_command: kind for kind in ELEMENT_TYPES.values()}


def element_bytes(element: Element) -> int:
    return len(json.dumps(element, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def check_fields_known(element_type: ElementType, fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(element_type.fields) - {"id"})
    if unknown:
        names = ", ".join(f"`{name}`" for name in unknown)
        verb = "is not a field" if len(unknown) == 1 else "are not fields"
        raise CanvasCommandError(
            f"{names} {verb} of a {element_type.name} element; its fields are: id, {', '.join(element_type.fields)}"
        )


def check_element(element: Element) -> None:
    """Raise CanvasCommandError unless `element` is a complete, valid element within the size limit."""
    element_type = ELEMENT_TYPES[element["type"]]
    check_id(element.get("id"))
    for name, rule in element_type.fields.items():
        value = element.get(name)
        if value is None:
            if rule.required:
                raise CanvasCommandError(f"a {element_type.name} needs `{name}`")
            continue
        rule.check(name, value)
    if element_type.consistent is not None:
        element_type.consistent(element)
    size = element_bytes(element)
    if size > MAX_ELEMENT_BYTES:
        raise CanvasCommandError(
            f"{element_type.name} `{element['id']}` would be {size} bytes of JSON; one element is at most "
            f"{MAX_ELEMENT_BYTES} bytes (16 KiB): make it shorter or split it into several elements",
            code="too_large",
        )


def element_build(element_type: ElementType, params: dict[str, Any]) -> Element:
    """A new element of `element_type` from a tool's input; validated, raises CanvasCommandError."""
    check_fields_known(element_type, params)
    check_id(params.get("id"))
    element: Element = {"type": element_type.name, "id": params["id"]}
    element.update((name, value) for name, value in params.items() if name != "id" and value is not None)
    check_element(element)
    return element


def element_merge(element: Element, changes: dict[str, Any]) -> Element:
    """`element` with `changes` merged in (null removes an optional field); validated."""
    element_type = ELEMENT_TYPES[element["type"]]
    check_fields_known(element_type, changes)
    merged = dict(element)
    for name, value in changes.items():
        if name == "id":
            continue
        if value is None:
            if element_type.fields[name].required:
                raise CanvasCommandError(f"`{name}` of a {element_type.name} cannot be removed, only changed")
            merged.pop(name, None)
        else:
            merged[name] = value
    check_element(merged)
    return merged


def element_params(element: Element) -> dict[str, Any]:
    """The element's fields as the params of the command that adds it (replay, broadcast)."""
    return {name: value for name, value in element.items() if name != "type"}
