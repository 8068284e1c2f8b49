"""What a canvas element is: its type, its fields and their rules (README, "The canvas tools").

Each element type's fields are the input model of the tool that adds it (`CardIn`, `ChartIn`, …): its
JSON schema is that tool's definition (canvas.tools) and its validation is the element's check.
Pure functions on plain dicts, no database: `canvas.services` uses them under the row lock, and
anything else (a test, an import) can check an element the same way.
An element is stored as `{"type": ..., "id": ..., <fields>}`; the fields are the tool's input.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from django.conf import settings
from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from canvas.limits import (
    CHART_TYPES,
    ELEMENT_ID_PATTERN,
    ELEMENT_ID_RE,
    MAX_BUTTON_LABEL_CHARS,
    MAX_ELEMENT_BYTES,
    MAX_TITLE_CHARS,
    MEDIA_TYPES,
)
from lib.tool_inputs import (
    ToolInput,
    ToolInputError,
    input_error,
    json_type,
    not_blank,
    tool_input_parse,
)

Element = dict[str, Any]


@dataclass(frozen=True)
class CanvasChange:
    """One committed (or about to commit) canvas change: the command that makes it on a client, with
    the params the canvas stored, and the canvas version after it."""

    command: str
    params: dict[str, Any]
    version: int
    # One sentence for the tool_result the model reads.
    result: str = ""


class CanvasCommandError(ValueError):
    """A canvas command refused; the message says why in words the model (or a person) can act on.

    `code` names the kind of refusal for WebSocket `error` frames.
    """

    def __init__(self, message: str, *, code: str = "invalid_field") -> None:
        super().__init__(message)
        self.code = code


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _not_an_id(value: str) -> str:
    return f"{value[:80]!r} is not a valid element id: use 1–64 characters of A-Z a-z 0-9 _ . : -"


def _element_id(value: str) -> str:
    if not ELEMENT_ID_RE.match(value):
        raise input_error(_not_an_id(value))
    return value


def check_id(value: Any, field: str = "id") -> str:
    """An element id from outside a tool's input (a confirmation's answer): CanvasCommandError unless valid."""
    if not isinstance(value, str):
        raise CanvasCommandError(f"`{field}` must be a string, not {json_type(value)}")
    if not ELEMENT_ID_RE.match(value):
        raise CanvasCommandError(f"`{field}` {_not_an_id(value)}")
    return value


def _label(value: Any) -> Any:
    if not (isinstance(value, str) or _is_number(value)):
        raise input_error(f"must be a string or a number, not {json_type(value)}")
    return value


def _cell(value: Any) -> Any:
    if not (value is None or isinstance(value, str | bool) or _is_number(value)):
        raise input_error(f"must be a string, number, boolean or null, not {json_type(value)}")
    return value


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


def _url(value: str) -> str:
    if _SAME_SITE_PATH_RE.fullmatch(value) or media_host_allowed(value):
        return value
    hosts = ", ".join(settings.BUDDY_MEDIA_HOSTS) or "none are configured"
    raise input_error(
        f"must be a path on this site starting with a single '/', or an https:// URL on one of the "
        f"media hosts the server allows ({hosts}); {value[:80]!r} is neither"
    )


# The field types of the canvas tools: each rule once, as the schema the model reads and the check it meets.
ElementId = Annotated[
    str,
    AfterValidator(_element_id),
    Field(
        description="Your name for the element: 1–64 characters of A-Z a-z 0-9 _ . : -. "
        "Reuse an id to replace that element in place.",
        json_schema_extra={"pattern": ELEMENT_ID_PATTERN, "minLength": 1, "maxLength": 64},
    ),
]
Title = Annotated[str, Field(min_length=1, max_length=MAX_TITLE_CHARS), AfterValidator(not_blank)]
Text = Annotated[str, Field(min_length=1), AfterValidator(not_blank)]
ButtonLabel = Annotated[str, Field(min_length=1, max_length=MAX_BUTTON_LABEL_CHARS), AfterValidator(not_blank)]
ChartType = Literal[CHART_TYPES]
MediaType = Literal[MEDIA_TYPES]
Label = Annotated[Any, AfterValidator(_label), WithJsonSchema({"type": ["string", "number"]})]
Cell = Annotated[Any, AfterValidator(_cell), WithJsonSchema({"type": ["string", "number", "boolean", "null"]})]
Labels = Annotated[list[Label], Field(min_length=1)]
Columns = Annotated[list[str], Field(min_length=1)]
Rows = list[list[Cell]]
MediaUrl = Annotated[
    str, Field(min_length=1, description="A /path, or https:// on an allowed host."), AfterValidator(_url)
]


class Series(ToolInput):
    noun: ClassVar[str] = "a series"

    name: Annotated[Title, Field(description="Legend name of the series.")]
    values: list[float | None]


SeriesList = Annotated[
    list[Series],
    Field(min_length=1, description="One or more data series; each has one value per label, in label order."),
]


class CardIn(ToolInput):
    noun: ClassVar[str] = "a card"

    id: ElementId
    title: Annotated[Title, Field(description="Heading of the element.")]
    body: Annotated[str | None, Field(description="Plain text under the title.")] = None


class TextIn(ToolInput):
    noun: ClassVar[str] = "a text"

    id: ElementId
    content: Text
    title: Annotated[Title | None, Field(description="Optional heading of the element.")] = None


class ChartIn(ToolInput):
    noun: ClassVar[str] = "a chart"

    id: ElementId
    title: Annotated[Title, Field(description="Heading of the element.")]
    chart_type: ChartType
    labels: Labels
    series: SeriesList

    @model_validator(mode="after")
    def _one_value_per_label(self) -> ChartIn:
        count = len(self.labels)
        for index, series in enumerate(self.series):
            if len(series.values) != count:
                raise input_error(
                    f"`series[{index}]` ({series.name!r}) has {len(series.values)} values but there are "
                    f"{count} labels: give exactly one value per label"
                )
        return self


class TableIn(ToolInput):
    noun: ClassVar[str] = "a table"

    id: ElementId
    title: Annotated[Title, Field(description="Heading of the element.")]
    columns: Columns
    rows: Rows

    @model_validator(mode="after")
    def _one_cell_per_column(self) -> TableIn:
        count = len(self.columns)
        for index, row in enumerate(self.rows):
            if len(row) != count:
                raise input_error(
                    f"`rows[{index}]` has {len(row)} cells but there are {count} columns: give one cell per column"
                )
        return self


class MediaIn(ToolInput):
    noun: ClassVar[str] = "a media element"

    id: ElementId
    url: MediaUrl
    media_type: MediaType
    title: Annotated[Title | None, Field(description="Optional heading of the element.")] = None


class ConfirmationIn(ToolInput):
    noun: ClassVar[str] = "a confirmation"

    id: ElementId
    title: Annotated[Title, Field(description="Heading of the element.")]
    message: Annotated[Text, Field(description="The question, in plain text.")]
    confirm_label: ButtonLabel | None = None
    cancel_label: ButtonLabel | None = None


@dataclass(frozen=True)
class ElementType:
    name: str
    add_command: str
    # The add tool's input: the element's fields and their rules.
    model: type[ToolInput]
    # Written by the server, never by a command (a confirmation's answer).
    server_fields: tuple[str, ...] = ()

    @property
    def fields(self) -> list[str]:
        return [name for name in self.model.model_fields if name != "id"]

    def required(self, field: str) -> bool:
        return self.model.model_fields[field].is_required()


ELEMENT_TYPES: dict[str, ElementType] = {
    element_type.name: element_type
    for element_type in (
        ElementType("card", "canvas_add_card", CardIn),
        ElementType("text", "canvas_show_text", TextIn),
        ElementType("chart", "canvas_show_chart", ChartIn),
        ElementType("table", "canvas_show_table", TableIn),
        ElementType("media", "canvas_play_media", MediaIn),
        ElementType("confirmation", "canvas_show_confirmation", ConfirmationIn, server_fields=("answered", "outcome")),
    )
}
TYPE_BY_ADD_COMMAND: dict[str, ElementType] = {kind.add_command: kind for kind in ELEMENT_TYPES.values()}


def tool_input_check(model: type[ToolInput], params: Any) -> None:
    """CanvasCommandError, with the model's one-sentence reason, unless `params` is valid input of `model`."""
    try:
        tool_input_parse(model, params)
    except ToolInputError as error:
        raise CanvasCommandError(str(error)) from None


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


def check_element(element: Element, max_bytes: int = MAX_ELEMENT_BYTES) -> None:
    """Raise CanvasCommandError unless `element` is a complete, valid element within `max_bytes`."""
    element_type = ELEMENT_TYPES[element["type"]]
    skipped = {"type", *element_type.server_fields}
    tool_input_check(element_type.model, {name: value for name, value in element.items() if name not in skipped})
    size = element_bytes(element)
    if size > max_bytes:
        raise CanvasCommandError(
            f"{element_type.name} `{element['id']}` would be {size} bytes of JSON; one element is at most "
            f"{max_bytes} bytes ({max_bytes // 1024} KiB): make it shorter or split it into several elements",
            code="too_large",
        )


def element_build(element_type: ElementType, params: dict[str, Any], max_bytes: int = MAX_ELEMENT_BYTES) -> Element:
    """A new element of `element_type` from a tool's input; validated, raises CanvasCommandError.
    A field given as null is left out (the same as not giving it)."""
    given = {name: value for name, value in params.items() if value is not None}
    tool_input_check(element_type.model, given)
    element: Element = {"type": element_type.name, "id": params["id"]}
    element.update((name, value) for name, value in given.items() if name != "id")
    check_element(element, max_bytes)
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
            if element_type.required(name):
                raise CanvasCommandError(f"`{name}` of a {element_type.name} cannot be removed, only changed")
            merged.pop(name, None)
        else:
            merged[name] = value
    check_element(merged)
    return merged


def element_params(element: Element) -> dict[str, Any]:
    """The element's fields as the params of the command that adds it (replay, broadcast)."""
    return {name: value for name, value in element.items() if name != "type"}
