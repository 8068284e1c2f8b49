"""The canvas tools given to the model (README, "The canvas tools"), as Anthropic tool definitions.

Each tool's input is one Pydantic model (lib/tool_inputs.py): the element-adding tools
take the element models of `canvas.elements`, the others the models below. A definition's
`input_schema` is its model's schema, and `canvas.services.canvas_apply` validates with the same model,
so a model that follows the schema is never refused and one that does not is told which field and why.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from canvas.elements import (
    TYPE_BY_ADD_COMMAND,
    ButtonLabel,
    ChartType,
    Columns,
    ElementId,
    Labels,
    MediaType,
    MediaUrl,
    Rows,
    SeriesList,
    Text,
    Title,
)
from canvas.limits import (
    CANVAS_MODES,
    MAX_ELEMENT_BYTES,
    MAX_ELEMENTS,
    MAX_NOTIFICATION_CHARS,
    MAX_THEME_CHARS,
    NOTIFICATION_LEVELS,
)
from lib.tool_inputs import ToolInput, tool_definition


class UpdateIn(ToolInput):
    """Any field of any element type; `canvas.elements.element_merge` checks they belong to the element's."""

    noun: ClassVar[str] = "canvas_update_card"

    id: Annotated[ElementId, Field(description="Id of the element to change.")]
    title: Title | None = None
    body: str | None = None
    content: Text | None = None
    chart_type: ChartType | None = None
    labels: Labels | None = None
    series: SeriesList | None = None
    columns: Columns | None = None
    rows: Rows | None = None
    url: MediaUrl | None = None
    media_type: MediaType | None = None
    message: Text | None = None
    confirm_label: ButtonLabel | None = None
    cancel_label: ButtonLabel | None = None


class RemoveIn(ToolInput):
    noun: ClassVar[str] = "canvas_remove_element"

    id: Annotated[ElementId, Field(description="Id of the element to remove.")]


class ModeIn(ToolInput):
    noun: ClassVar[str] = "canvas_set_mode"

    mode: Literal[CANVAS_MODES]


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


class ThemeIn(ToolInput):
    noun: ClassVar[str] = "canvas_set_theme"

    # Surrounding spaces do not count: the stored theme is stripped.
    theme: Annotated[str, BeforeValidator(_stripped), Field(max_length=MAX_THEME_CHARS)]


class NotificationIn(ToolInput):
    noun: ClassVar[str] = "canvas_show_notification"

    message: Annotated[Text, Field(max_length=MAX_NOTIFICATION_CHARS)]
    level: Annotated[Literal[NOTIFICATION_LEVELS] | None, Field(description="Default: info.")] = None


_LIMITS = (
    f" At most {MAX_ELEMENTS} elements are on the canvas and one element is at most "
    f"{MAX_ELEMENT_BYTES // 1024} KiB of JSON."
)
_DESCRIPTIONS: dict[str, str] = {
    "canvas_add_card": "Put a card on the canvas the user sees beside the chat: a title with an optional short body "
    "of plain text (never HTML). Use cards for key facts, summaries, plans and to-dos the user should keep in "
    "view. An existing id is replaced in place." + _LIMITS,
    "canvas_show_text": "Show a longer block of plain text on the canvas (notes, a draft, code or a poem), with an "
    "optional title. Line breaks are kept; it is never interpreted as HTML. An existing id is replaced "
    "in place." + _LIMITS,
    "canvas_show_chart": "Draw a line, bar or pie chart on the canvas. `labels` are the x-axis categories (or pie "
    "slices); every series gives exactly one number per label, in the same order. An existing id is replaced "
    "in place." + _LIMITS,
    "canvas_show_table": "Show a table on the canvas: column headings and rows, each row holding exactly one cell per "
    "column (text, a number, true/false or null). An existing id is replaced in place." + _LIMITS,
    "canvas_play_media": "Show an image or play an audio or video file on the canvas, from a path on this server "
    "starting with '/' or an https URL on a media host the server allows (others are refused, with the list). "
    "An existing id is replaced in place." + _LIMITS,
    "canvas_show_confirmation": "Ask the user to confirm or decline something with two buttons on the canvas. Their "
    "answer comes back to you later as a new user message `[confirmation ID: confirmed]` or "
    "`[confirmation ID: declined]`; do not assume the answer before it arrives. An existing id is "
    "replaced in place (and can be answered again)." + _LIMITS,
    "canvas_update_card": "Change some fields of an element already on the canvas (a card or any other type), keeping "
    "the rest and its position. Give its id and only the fields to change; they must be fields of that "
    "element's type (for example `body` of a card, `series` of a chart, `rows` of a table). Set an "
    "optional field to null to remove it. The type of an element cannot change: add it again instead.",
    "canvas_remove_element": "Remove one element from the canvas by its id.",
    "canvas_set_mode": "`clear` removes every element from the canvas (start over); `content` is the normal mode.",
    "canvas_set_theme": "Set the canvas theme, for example `light` or `dark`; an empty string goes back to the "
    "default. It is remembered for this conversation.",
    "canvas_show_notification": "Pop up a short notification for the user right now. It is shown once and not kept "
    "on the canvas, so use a card for anything the user should still see later.",
}

# Each canvas tool's input model, in the order the model is given the tools.
CANVAS_INPUTS: dict[str, type[ToolInput]] = {
    **{command: element_type.model for command, element_type in TYPE_BY_ADD_COMMAND.items()},
    "canvas_update_card": UpdateIn,
    "canvas_remove_element": RemoveIn,
    "canvas_set_mode": ModeIn,
    "canvas_set_theme": ThemeIn,
    "canvas_show_notification": NotificationIn,
}
CANVAS_TOOLS: list[dict[str, Any]] = [
    tool_definition(name, _DESCRIPTIONS[name], model) for name, model in CANVAS_INPUTS.items()
]
CANVAS_TOOL_NAMES: frozenset[str] = frozenset(CANVAS_INPUTS)
