"""Each tool's input is one Pydantic model: its schema is the definition the model is sent, and its
validation error is the model's `is_error` text, naming the field and why (lib/tool_inputs.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.models import ScheduledPrompt
from agent.schedules import ScheduleIn
from canvas.models import CanvasState
from canvas.tools import CANVAS_INPUTS, ThemeIn
from conversations.models import Message
from lib.tool_inputs import ToolInputError, input_schema, tool_input_parse
from memory.tools import MEMORY_INPUTS

pytestmark = pytest.mark.django_db(transaction=True)

INPUTS = {**CANVAS_INPUTS, **MEMORY_INPUTS, "schedule_prompt": ScheduleIn}
CHART = {"id": "c", "title": "C", "chart_type": "bar", "labels": ["a", "b"]}
TABLE = {"id": "t", "title": "T", "columns": ["a"]}


def keywords(schema: Any) -> set[str]:
    """Every JSON-schema keyword used in `schema`, at any depth (property names are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(keywords(item) for item in schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key == "properties":
            found |= set().union(*(keywords(spec) for spec in value.values()))
        else:
            found |= keywords(value)
    return found


def run_tool(fake_anthropic, session, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """One turn in which the model calls `name` with `tool_input`; the tool_result block it gets back."""
    from agent.turn import turn_run

    fake_anthropic.queue_tool_call(name, tool_input)
    fake_anthropic.queue_text("ok")
    turn_run(session=session, text="go")
    result_message = Message.objects.filter(session=session, role="user").order_by("id")[1]
    return result_message.content[0]


def test_the_tools_sent_to_the_model_are_the_input_models_schemas(fake_anthropic, session):
    from agent.turn import turn_run

    fake_anthropic.queue_text("hello")
    turn_run(session=session, text="hi")
    tools = fake_anthropic.requests[0]["body"]["tools"]
    sent = {tool["name"]: tool for tool in tools if "input_schema" in tool}
    assert set(sent) == set(INPUTS)
    # The one tool without a schema of ours: Anthropic's memory tool, typed by the API (README: Memory notes).
    assert [
        {k: v for k, v in tool.items() if k != "cache_control"} for tool in tools if "input_schema" not in tool
    ] == [{"type": "memory_20250818", "name": "memory"}]
    for name, model in INPUTS.items():
        schema = sent[name]["input_schema"]
        assert schema == input_schema(model), name
        assert set(schema["properties"]) == set(model.model_fields), name
        assert schema["type"] == "object" and len(sent[name]["description"]) > 20


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_schema_is_self_contained_and_plain(name):
    """What the Messages API reads: an object schema, no references to resolve, no titles or docstrings."""
    schema = input_schema(INPUTS[name])
    assert schema["type"] == "object"
    assert not keywords(schema) & {"$ref", "$defs", "title", "definitions"}
    assert "description" not in schema  # the tool's own description says what it does
    assert json.loads(json.dumps(schema)) == schema


@pytest.mark.parametrize(
    ("name", "tool_input", "sentence"),
    [
        (
            "canvas_show_chart",
            {
                "id": "c",
                "title": "C",
                "chart_type": "bar",
                "labels": ["a", "b"],
                "series": [{"name": "s", "values": [1, "2"]}],
            },
            "`series[0].values[1]` must be a number, not '2'",
        ),
        ("canvas_add_card", {"id": "c", "title": "C", "colour": "red"}, "`colour` is not a field of a card"),
        (
            "canvas_show_table",
            {"id": "t", "title": "T", "columns": ["a"], "rows": [["x", "y"]]},
            "`rows[0]` has 2 cells",
        ),
        ("canvas_set_theme", {"theme": 3}, "`theme` must be a string, not 3"),
        ("search_history", {"query": "x", "limit": 0}, "`limit` must be at least 1, not 0"),
        ("search_history", {"query": "x", "limit": "5"}, "`limit` must be a whole number of at least 1 and at most 20"),
        ("get_messages_by_date", {"date": "yesterday"}, "`date` must be a day written YYYY-MM-DD"),
        ("get_extended_context", {"count": True}, "`count` must be a whole number of at least 1 and at most 200"),
        ("schedule_prompt", {"every_seconds": 3600}, "`text` is required"),
        ("schedule_prompt", {"text": "x", "every_seconds": "3600"}, "`every_seconds` must be a whole number"),
        ("schedule_prompt", {"text": "x", "at": "soon"}, "`at` must be an ISO-8601 date-time"),
    ],
)
def test_invalid_input_from_the_model_is_an_error_result_that_names_the_field_and_stores_nothing(
    fake_anthropic, session, name, tool_input, sentence
):
    result = run_tool(fake_anthropic, session, name, tool_input)
    assert result["is_error"] is True
    assert sentence in result["content"], result["content"]
    assert result["content"].startswith(f"{name} failed")
    assert not CanvasState.objects.exclude(elements=[]).exists()
    assert not ScheduledPrompt.objects.exists()
    # The model reads the error and goes on: the turn ends with its reply.
    assert Message.objects.filter(session=session).order_by("-id").first().role == "assistant"


def test_valid_input_from_the_model_runs(fake_anthropic, session):
    result = run_tool(fake_anthropic, session, "canvas_add_card", {"id": "c", "title": "C", "body": None})
    assert "is_error" not in result
    assert CanvasState.objects.get(session=session).elements == [{"type": "card", "id": "c", "title": "C"}]


def test_one_sentence_counts_the_further_problems():
    with pytest.raises(ToolInputError) as refused:
        tool_input_parse(CANVAS_INPUTS["canvas_add_card"], {"id": 7, "title": 8, "body": 9})
    assert str(refused.value) == "`id` must be a string, not 7 (and 2 more problems)"


def test_the_models_are_strict():
    """No coercion: what the schema says is what is accepted."""
    for tool_input in ({"theme": b"dark"}, {"theme": ["dark"]}, {"theme": None}):
        with pytest.raises(ToolInputError):
            tool_input_parse(ThemeIn, tool_input)
    assert tool_input_parse(ThemeIn, {"theme": "  dark  "}).theme == "dark"
