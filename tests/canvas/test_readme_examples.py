"""README's canvas tools table: every canvas tool is there, and every example works as written."""

from __future__ import annotations

import json
import re

import pytest

from agent.tools import tool_round_run
from canvas.tools import CANVAS_TOOL_NAMES
from devtools.servers import ROOT

pytestmark = pytest.mark.django_db

ROW = re.compile(r"^\| `(canvas_[a-z_]+)` \| `(\{.*?\})`", re.MULTILINE)


def readme_examples() -> list[tuple[str, dict]]:
    return [(name, json.loads(item)) for name, item in ROW.findall((ROOT / "README.md").read_text())]


def test_every_canvas_tool_has_one_example_and_each_runs(session):
    examples = readme_examples()
    assert sorted(name for name, _ in examples) == sorted(CANVAS_TOOL_NAMES)
    uses = [
        {"id": f"t{index}", "name": item["name"], "input": item["input"]} for index, (_, item) in enumerate(examples)
    ]
    assert all(name == item["name"] for name, item in examples)
    results = tool_round_run(session=session, tool_uses=uses)
    failed = [
        (use["name"], block["content"])
        for use, block in zip(uses, results.content, strict=True)
        if block.get("is_error")
    ]
    assert failed == []
