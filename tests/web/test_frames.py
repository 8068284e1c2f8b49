"""The frame models of realtime/frames.py are the vocabulary the consumer accepts and the page follows:
every frame type the server sends is handled by the page (static/buddy/), the page handles no frame
type or error code the server never sends, and every frame type the page sends is one the consumer
accepts. The page's modules are read together, whichever of them holds each piece."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from conversations.schemas import ErrorCode as HttpErrorCode
from realtime import frames
from web.consumers import CanvasConsumer

PAGE = Path(__file__).resolve().parents[2] / "static" / "buddy"

# Codes the page makes up itself for what never reached the server (no server frame carries them).
PAGE_ONLY_CODES = {"network"}


def page_source() -> str:
    return "\n".join(path.read_text() for path in sorted(PAGE.glob("*.js")))


def _on_frame_cases(source: str) -> set[str]:
    body = source[source.index("onFrame(frame) {") :]
    body = body[: body.index("\n  }\n")]
    return set(re.findall(r'case "([a-z_]+)":', body))


def _error_codes_named(source: str) -> set[str]:
    """The codes the page treats specially: keys of ERROR_TITLES, `errorCode === "…"` comparisons,
    and the codes it makes up (`code: "…"`)."""
    titles = source[source.index("const ERROR_TITLES = {") :]
    titles = titles[: titles.index("};")]
    named = set(re.findall(r"^\s+([a-z_]+):", titles, re.MULTILINE))
    named |= set(re.findall(r'errorCode === "([a-z_]+)"', source))
    named |= set(re.findall(r'code: "([a-z_]+)"', source))
    return named


def _sent_types(source: str) -> set[str]:
    return set(re.findall(r'send\(\{ type: "([a-z_]+)"', source))


def test_the_page_handles_exactly_the_frames_the_server_sends():
    assert _on_frame_cases(page_source()) == set(frames.SERVER_FRAME_TYPES)


def test_the_page_handles_no_error_code_the_server_never_sends():
    """The page shows the codes of error frames and of HTTP error bodies (a long prompt goes over HTTP)."""
    named = _error_codes_named(page_source())
    assert named, "the page names no error code: the parsing above no longer matches the page"
    assert named - PAGE_ONLY_CODES <= set(frames.ERROR_CODES) | set(get_args(HttpErrorCode))


def test_the_page_sends_only_frames_the_consumer_accepts_and_the_consumer_handles_each():
    sent = _sent_types(page_source())
    assert sent, "the page sends no frame: the parsing above no longer matches the page"
    assert sent <= set(frames.CLIENT_FRAME_TYPES)
    handled = {model.model_fields["type"].annotation for model in CanvasConsumer.frame_handlers}
    assert {get_args(kind)[0] for kind in handled} == set(frames.CLIENT_FRAME_TYPES)


def test_the_checks_above_would_see_a_frame_or_code_outside_the_list():
    source = page_source()
    extra_case = source.replace('      case "error":', '      case "typing":\n        break;\n      case "error":', 1)
    assert "typing" in _on_frame_cases(extra_case) - set(frames.SERVER_FRAME_TYPES)
    extra_code = source.replace("const ERROR_TITLES = {", 'const ERROR_TITLES = {\n  canceled: "Stopped",', 1)
    assert "canceled" in _error_codes_named(extra_code) - set(frames.ERROR_CODES)


def test_an_error_frame_with_an_unlisted_code_cannot_be_built():
    assert frames.ErrorFrame(code="turn_running", detail="busy").dump() == {
        "type": "error",
        "code": "turn_running",
        "detail": "busy",
    }
    with pytest.raises(ValidationError, match="code"):
        frames.ErrorFrame(code="cancelled", detail="stopped")


def test_a_tool_result_frame_carries_a_summary_of_at_most_its_length():
    frame = frames.ToolResultFrame.summarized(tool_use_id="t1", is_error=False, text="x" * 500)
    assert len(frame.summary) == frames.TOOL_SUMMARY_CHARS and frame.summary.endswith("…")
    assert frames.ToolResultFrame.summarized(tool_use_id="t1", is_error=True, text="short").summary == "short"
    with pytest.raises(ValidationError):
        frames.ToolResultFrame(tool_use_id="t1", is_error=False, summary="x" * 500)
