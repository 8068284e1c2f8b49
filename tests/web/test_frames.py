"""The frame vocabulary of conversations/events.py is the one the consumer accepts and the page follows:
every frame type the server sends is handled by static/buddy/app.js, the page handles no frame type or
error code the server never sends, and every frame type the page sends is one the consumer accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conversations import events
from web.consumers import CanvasConsumer

APP_JS = Path(__file__).resolve().parents[2] / "static" / "buddy" / "app.js"

# Codes the page makes up itself for what never reached the server (no server frame carries them).
PAGE_ONLY_CODES = {"network"}


def _on_frame_cases(source: str) -> set[str]:
    body = source[source.index("  onFrame(frame) {") :]
    body = body[: body.index("\n  }\n")]
    return set(re.findall(r'case "([a-z_]+)":', body))


def _error_codes_named(source: str) -> set[str]:
    """The codes the page treats specially: keys of ERROR_TITLES, `errorCode === "…"` comparisons,
    and the codes it gives HTTP answers."""
    titles = source[source.index("const ERROR_TITLES = {") :]
    titles = titles[: titles.index("};")]
    named = set(re.findall(r"^\s+([a-z_]+):", titles, re.MULTILINE))
    named |= set(re.findall(r'errorCode === "([a-z_]+)"', source))
    named |= set(re.findall(r'code: "([a-z_]+)"', source))
    statuses = re.search(r"const codes = \{([^}]*)\}", source)
    if statuses:
        named |= set(re.findall(r'"([a-z_]+)"', statuses.group(1)))
    return named


def _sent_types(source: str) -> set[str]:
    return set(re.findall(r'send\(\{ type: "([a-z_]+)"', source))


def test_the_page_handles_exactly_the_frames_the_server_sends():
    assert _on_frame_cases(APP_JS.read_text()) == set(events.SERVER_FRAME_TYPES)


def test_the_page_handles_no_error_code_the_server_never_sends():
    named = _error_codes_named(APP_JS.read_text())
    assert named, "the page names no error code: the parsing above no longer matches app.js"
    assert named - PAGE_ONLY_CODES <= set(events.ERROR_CODES)


def test_the_page_sends_only_frames_the_consumer_accepts_and_the_consumer_accepts_the_list():
    sent = _sent_types(APP_JS.read_text())
    assert sent, "the page sends no frame: the parsing above no longer matches app.js"
    assert sent <= set(events.CLIENT_FRAME_TYPES)
    assert set(CanvasConsumer.frame_handlers) == set(events.CLIENT_FRAME_TYPES)


def test_the_checks_above_would_see_a_frame_or_code_outside_the_list():
    source = APP_JS.read_text()
    extra_case = source.replace('      case "error":', '      case "typing":\n        break;\n      case "error":', 1)
    assert "typing" in _on_frame_cases(extra_case) - set(events.SERVER_FRAME_TYPES)
    extra_code = source.replace("const ERROR_TITLES = {", 'const ERROR_TITLES = {\n  canceled: "Stopped",', 1)
    assert "canceled" in _error_codes_named(extra_code) - set(events.ERROR_CODES)


def test_an_error_frame_with_an_unlisted_code_is_refused():
    assert events.error("turn_running", "busy") == {"type": "error", "code": "turn_running", "detail": "busy"}
    with pytest.raises(ValueError, match="unknown error code"):
        events.error("cancelled", "stopped")


def test_a_tool_result_frame_carries_a_summary_of_at_most_its_length():
    frame = events.tool_result(tool_use_id="t1", is_error=False, text="x" * 500)
    assert len(frame["summary"]) == events.TOOL_SUMMARY_CHARS and frame["summary"].endswith("…")
    assert events.tool_result(tool_use_id="t1", is_error=True, text="short")["summary"] == "short"
