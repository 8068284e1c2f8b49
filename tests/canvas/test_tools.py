from __future__ import annotations

import pytest

from canvas.services import CanvasCommandError, canvas_apply
from canvas.tools import CANVAS_TOOL_NAMES, CANVAS_TOOLS
from tests.canvas.examples import ADD_EXAMPLES

CONTRACT_TOOLS = {
    "canvas_add_card",
    "canvas_show_text",
    "canvas_show_chart",
    "canvas_show_table",
    "canvas_play_media",
    "canvas_show_confirmation",
    "canvas_update_card",
    "canvas_remove_element",
    "canvas_set_mode",
    "canvas_set_theme",
    "canvas_show_notification",
}


def test_every_contract_tool_is_defined_once_with_a_description_and_an_object_schema():
    assert CANVAS_TOOL_NAMES == CONTRACT_TOOLS
    assert len(CANVAS_TOOLS) == len(CONTRACT_TOOLS)
    for tool in CANVAS_TOOLS:
        assert set(tool) == {"name", "description", "input_schema"}
        assert len(tool["description"]) > 40
        schema = tool["input_schema"]
        assert schema["type"] == "object"
        assert set(schema["required"]) <= set(schema["properties"])


@pytest.mark.django_db
@pytest.mark.parametrize("command", sorted(ADD_EXAMPLES))
def test_the_schemas_required_fields_are_exactly_what_the_service_requires(session, command):
    tool = next(tool for tool in CANVAS_TOOLS if tool["name"] == command)
    assert set(ADD_EXAMPLES[command]) == set(tool["input_schema"]["properties"])
    canvas_apply(session=session, command=command, params=ADD_EXAMPLES[command])
    for field in tool["input_schema"]["properties"]:
        params = {name: value for name, value in ADD_EXAMPLES[command].items() if name != field}
        if field in tool["input_schema"]["required"]:
            with pytest.raises(CanvasCommandError):
                canvas_apply(session=session, command=command, params=params)
        else:
            canvas_apply(session=session, command=command, params=params)


@pytest.mark.parametrize("command", sorted(ADD_EXAMPLES))
def test_schema_enums_match_the_service(command):
    schema = next(tool for tool in CANVAS_TOOLS if tool["name"] == command)["input_schema"]
    enums = {name: spec["enum"] for name, spec in schema["properties"].items() if "enum" in spec}
    expected = {
        "canvas_show_chart": {"chart_type": ["line", "bar", "pie"]},
        "canvas_play_media": {"media_type": ["image", "audio", "video"]},
    }
    assert enums == expected.get(command, {})
