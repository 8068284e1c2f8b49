"""realtime/frames.py: one model per frame, both ways; what a client frame may be and the code it gets
when it is not; the README's frame table is the models' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.frames_table import BEGIN, END, frames_table
from realtime import frames, push
from realtime.frames import (
    CLIENT_FRAME_TYPES,
    ERROR_CODES,
    SERVER_FRAME_TYPES,
    ConfirmationResponseFrame,
    FrameError,
    PromptFrame,
    SwitchAgentFrame,
    client_frame_read,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def read(text: str | None, data: bytes | None = None):
    return client_frame_read(text, data, max_bytes=1000, max_depth=4)


def test_the_readme_table_of_frames_is_the_one_the_models_make():
    readme = README.read_text()
    assert BEGIN in readme and END in readme, "the README lost the markers of its frame table"
    table = readme[readme.index(BEGIN) : readme.index(END) + len(END)]
    assert table == frames_table(), "paste the output of `python -m devtools.frames_table` into the README"


def test_the_readme_names_every_frame_type_and_every_error_code_of_the_socket():
    section = README.read_text().split("\n## WebSocket\n", 1)[1].split("\n## ", 1)[0]
    for name in (*SERVER_FRAME_TYPES, *CLIENT_FRAME_TYPES, *ERROR_CODES):
        assert f"`{name}`" in section, name


def test_a_good_frame_of_each_type_is_read_as_its_model():
    assert read('{"type": "prompt", "text": "hi", "extra": 1}') == PromptFrame(type="prompt", text="hi")
    assert isinstance(read('{"type": "cancel"}'), frames.CancelFrame)
    assert isinstance(read('{"type": "replay"}'), frames.ReplayFrame)
    assert read('{"type": "switch_agent"}') == SwitchAgentFrame(type="switch_agent", agent=None)
    assert read('{"type": "confirmation_response", "id": "go", "confirmed": false}') == ConfirmationResponseFrame(
        type="confirmation_response", id="go", confirmed=False
    )


@pytest.mark.parametrize(
    ("text", "code", "said"),
    [
        ('{"type": "prompt", "text": "   "}', "invalid_field", "`text`: must not be empty"),
        ('{"type": "prompt"}', "invalid_field", "`text`: Field required"),
        ('{"type": "prompt", "text": 5}', "invalid_field", "`text`"),
        ('{"type": "confirmation_response", "id": "go", "confirmed": "yes"}', "invalid_field", "`confirmed`"),
        ('{"type": "confirmation_response", "id": "go", "confirmed": 1}', "invalid_field", "`confirmed`"),
        ('{"type": "switch_agent", "agent": "no body"}', "invalid_agent", "agent's slug"),
        ('{"type": "dance"}', "unknown_type", "'dance'; known: prompt, cancel"),
        ('{"type": 5}', "invalid_frame", 'a string "type"'),
        ('{"text": "no type"}', "invalid_frame", 'a string "type"'),
        ("[1, 2]", "invalid_frame", 'a string "type"'),
        ('"replay"', "invalid_frame", 'a string "type"'),
        ("{not json", "invalid_json", "not valid JSON"),
        ('{"type": "prompt", "text": "a\\u0000b"}', "nul_character", "NUL"),
        ('{"type": "prompt", "text": "a\\ud800b"}', "invalid_unicode", "lone surrogate"),
        ('{"type": "prompt", "\\ud800": 1, "text": "b"}', "invalid_unicode", "lone surrogate"),
        ('{"type": "prompt", "text": "hi", "x": [[[[1]]]]}', "too_deep", "at most 4 deep"),
        ('{"type": "prompt", "text": "' + "é" * 600 + '"}', "frame_too_large", "at most 1000 bytes"),
    ],
)
def test_a_bad_frame_gets_the_code_of_its_first_problem_and_says_it(text, code, said):
    with pytest.raises(FrameError) as refused:
        read(text)
    assert refused.value.code == code and said in refused.value.detail
    assert refused.value.code in ERROR_CODES


def test_a_binary_frame_is_refused_before_anything_else():
    with pytest.raises(FrameError) as refused:
        read(None, b'{"type": "replay"}')
    assert refused.value.code == "binary_frame"


def test_a_frame_that_is_too_deep_is_refused_without_exhausting_the_stack():
    with pytest.raises(FrameError) as refused:
        client_frame_read("[" * 100_000 + "]" * 100_000, None, max_bytes=10**6, max_depth=32)
    assert refused.value.code == "too_deep"


def test_server_frames_are_built_only_through_their_models(monkeypatch):
    monkeypatch.setattr(push, "session_group", lambda session: "chat.0.0.none")
    with pytest.raises(Exception, match="kind"):
        frames.UserMessageFrame(text="hi", message_id=1, kind="whispered")
    with pytest.raises(Exception, match="extra"):
        frames.AssistantDeltaFrame(text="hi", colour="red")
    with pytest.raises(AttributeError):
        push.push_frame(1, {"type": "assistant_delta", "text": "a dict is not a frame"})


def test_the_suite_wide_check_sees_a_frame_no_model_allows(frames_checked, monkeypatch):
    """The autouse check of tests/conftest.py is in place and would fail a test that sent this."""
    monkeypatch.setattr(push, "session_group", lambda session: "chat.0.0.none")
    push._group_send("chat.0.0.none", {"type": "frame", "frame": {"type": "assistant_delta", "colour": "red"}})
    push._group_send("chat.0.0.none", {"type": "frame", "frame": {"type": "assistant_delta", "text": "ok"}})
    assert len(frames_checked.bad) == 1 and "colour" in frames_checked.bad[0]
    frames_checked.bad.clear()
