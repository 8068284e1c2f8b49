"""The frame models of realtime/frames.py are the vocabulary the consumer accepts and the page follows:
every frame type the server sends has a handler in the page (static/buddy/app.js `frameHandlers`), the
page handles no frame type or error code the server never sends (its modules name codes only from the
server's answers, never by HTTP status), and every frame type the page sends is one the consumer accepts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from conversations.schemas import ErrorCode as HttpErrorCode
from realtime import frames
from web.consumers import CanvasConsumer

PAGE_JS = Path(__file__).resolve().parents[2] / "static" / "buddy"
APP_JS = PAGE_JS / "app.js"
ERRORS_JS = PAGE_JS / "errors.js"

# Codes the page makes up itself for what never reached the server (no server frame carries them).
PAGE_ONLY_CODES = {"network"}
# The codes the page may name: those of socket error frames and of HTTP error bodies (a long prompt
# goes over HTTP).
SERVER_CODES = set(frames.ERROR_CODES) | set(get_args(HttpErrorCode))


def _page_source() -> str:
    """Every module of the page (libraries vendored under static/buddy/vendor are not the page's)."""
    modules = sorted(path for path in PAGE_JS.rglob("*.js") if "vendor" not in path.relative_to(PAGE_JS).parts)
    return "\n".join(path.read_text() for path in modules)


def _handled_frame_types(source: str) -> set[str]:
    body = source[source.index("  frameHandlers() {") :]
    body = body[: body.index("\n  }\n")]
    return set(re.findall(r"^\s+([a-z_]+): \(frame\) =>", body, re.MULTILINE))


def _error_codes_named(source: str) -> set[str]:
    """The codes the page treats specially: keys of ERROR_TITLES, `… === "code"` comparisons, and
    the codes it makes up (`code: "…"`)."""
    source = re.sub(r'typeof [\w.]+ [!=]== "[a-z]+"', "", source)  # type checks name no code
    named: set[str] = set()
    if "export const ERROR_TITLES = {" in source:
        titles = source[source.index("export const ERROR_TITLES = {") :]
        titles = titles[: titles.index("};")]
        named |= set(re.findall(r"^\s+([a-z_]+):", titles, re.MULTILINE))
    named |= set(re.findall(r'[cC]ode === "([a-z_]+)"', source))
    named |= set(re.findall(r'code: "([a-z_]+)"', source))
    return named


def _status_to_code_maps(source: str) -> list[str]:
    """Object literals that give an HTTP status a code (`{ 404: "not_found" }`): the page reads codes
    from the server's answers instead."""
    return re.findall(r'\b[1-5]\d\d: "[a-z_]+"', source)


def _sent_types(source: str) -> set[str]:
    return set(re.findall(r'send\(\{ type: "([a-z_]+)"', source))


def test_the_page_handles_exactly_the_frames_the_server_sends():
    assert _handled_frame_types(APP_JS.read_text()) == set(frames.SERVER_FRAME_TYPES)


def test_the_page_handles_no_error_code_the_server_never_sends():
    named = _error_codes_named(_page_source())
    assert named, "the page names no error code: the parsing above no longer matches its modules"
    assert named - PAGE_ONLY_CODES <= SERVER_CODES
    assert _error_codes_named(ERRORS_JS.read_text()) >= {"model_failed", "turn_running", "too_large"}


def test_the_page_never_maps_an_http_status_to_an_error_code():
    assert _status_to_code_maps(_page_source()) == []


def test_the_page_sends_only_frames_the_consumer_accepts_and_the_consumer_handles_each():
    sent = _sent_types(_page_source())
    assert sent, "the page sends no frame: the parsing above no longer matches its modules"
    assert sent <= set(frames.CLIENT_FRAME_TYPES)
    handled = {model.model_fields["type"].annotation for model in CanvasConsumer.frame_handlers}
    assert {get_args(kind)[0] for kind in handled} == set(frames.CLIENT_FRAME_TYPES)


def test_the_checks_above_would_see_a_frame_or_code_outside_the_list():
    source = APP_JS.read_text()
    handler = "      error: (frame) => this.onError(frame),"
    assert handler in source
    extra_case = source.replace(handler, handler + "\n      typing: (frame) => this.onTyping(frame),", 1)
    assert "typing" in _handled_frame_types(extra_case) - set(frames.SERVER_FRAME_TYPES)
    titles = "export const ERROR_TITLES = {"
    extra_code = ERRORS_JS.read_text().replace(titles, titles + '\n  canceled: "Stopped",', 1)
    assert "canceled" in _error_codes_named(extra_code) - SERVER_CODES
    assert _status_to_code_maps('const codes = { 409: "turn_running", 404: "unknown_agent" };')


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
