"""import_history against hostile files: a clear error naming the line, never a traceback, never an empty
or doubled chat; and an archive holding what the Messages API refuses never fails a later turn."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agent.turn import turn_run
from conversations.models import Message, Session
from conversations.services import message_append

pytestmark = pytest.mark.django_db

HELLO = json.dumps({"role": "user", "content": "hello", "created_at": "2026-01-02T10:00:00Z"})
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "canvas_add_card", "input": {"id": "c", "title": "T"}}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write(path: Path, lines: list[str | bytes]) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


def line(role: str, content) -> str:
    return json.dumps({"role": role, "content": content})


def nested(depth: int) -> str:
    return (
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x", "n": '
        + ("[" * depth + "]" * depth)
        + "}]}"
    )


HOSTILE = [
    ('{"role": "user", "content": "x", "created_at": "2026-02-30T08:00:00Z"}', "not a real ISO-8601"),
    ('{"role": "user", "content": "x", "created_at": "0000-01-01T00:00:00Z"}', "not a real ISO-8601"),
    ('{"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00+05:00"}', "not a real ISO-8601"),
    ("[" * 100_000, "nested too deeply"),
    (nested(200), "nested deeper than 64"),
    ('{"role": "user", "content": "x\\ud800y"}', "not valid Unicode"),
    ('{"role": "user", "content": "a\\u0000b"}', "NUL"),
    (line("user", [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": 5}]}]), "text"),
    ('{"role": "user", "content": [{"type": "text", "text": "x", "n": 1e400}]}', "out of range"),
    ('{"role": "user", "content": [{"type": "text", "text": "x", "n": NaN}]}', "not JSON"),
    ('{"role": "user", "content": [{"type": "text", "text": "x", "n": ' + "9" * 5000 + "}]}", "not valid JSON"),
    (line("user", [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]), "cache_control"),
    (line("user", [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]), "cache_control"),
    (line("assistant", [IMAGE]), "image block 0 must be in a user message"),
    (line("assistant", [{**TOOL_USE, "id": "tool use 1"}]), "an id is 1-128 characters"),
    (b'{"role": "user", "content": "caf\xe9"}', "not UTF-8"),
]


@pytest.mark.parametrize(("bad", "reason"), HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_line_is_a_clear_error_naming_it_and_imports_nothing(tmp_path, user, bad, reason):
    path = write(tmp_path / "in.jsonl", [HELLO, bad, HELLO])
    with pytest.raises(CommandError) as raised:
        run("import_history", str(path), "--user", "alice")
    assert "line 2: " in str(raised.value) and reason in str(raised.value), str(raised.value)
    assert "Nothing was imported" in str(raised.value)
    assert not Session.objects.exists() and not Message.objects.exists()


def test_a_line_over_the_size_cap_is_refused_without_reading_it_whole(tmp_path, user, settings):
    settings.BUDDY_IMPORT_MESSAGE_BYTES = 1000
    path = write(tmp_path / "in.jsonl", [HELLO, line("user", "x" * 5000)])
    with pytest.raises(CommandError, match=r"line 2: longer than 1,000 bytes"):
        run("import_history", str(path), "--user", "alice")
    assert not Session.objects.exists()


def test_a_file_with_no_messages_creates_no_chat(tmp_path, user):
    with pytest.raises(CommandError, match="no messages"):
        run("import_history", str(write(tmp_path / "in.jsonl", ["", "  "])), "--user", "alice")
    assert not Session.objects.exists()


def test_importing_the_same_history_twice_is_refused_not_doubled(tmp_path, user):
    lines = [HELLO, line("assistant", "hi"), line("user", "how are you?")]
    path = write(tmp_path / "in.jsonl", lines)
    assert "Imported 3 message(s)" in run("import_history", str(path), "--user", "alice")
    reformatted = write(
        tmp_path / "again.jsonl", [json.dumps(json.loads(x), indent=None, separators=(",", ":")) for x in lines]
    )
    for again in (path, reformatted):
        with pytest.raises(CommandError, match="already imported into this chat"):
            run("import_history", str(again), "--user", "alice")
    assert Message.objects.count() == 3
    run("import_history", str(path), "--user", "alice", "--chat-id", "elsewhere")  # another chat may have it
    assert Message.objects.count() == 6


def test_importing_a_chats_own_export_back_into_it_is_refused(tmp_path, user):
    run("import_history", str(write(tmp_path / "in.jsonl", [HELLO, line("assistant", "hi")])), "--user", "alice")
    exported = tmp_path / "out.jsonl"
    exported.write_text(run("export_history", "--user", "alice"), encoding="utf-8")
    lines = exported.read_text().splitlines()
    write(exported, [*lines, line("user", "one more")])  # not the same file, but it starts with the chat's messages
    with pytest.raises(CommandError, match="already holds the file's first message"):
        run("import_history", str(exported), "--user", "alice")
    assert Message.objects.count() == 2


ARCHIVED_HOSTILE = [
    # Five breakpoints in the archive would make six with Buddy's own.
    [("user", [{"type": "text", "text": f"note {i}", "cache_control": {"type": "ephemeral"}}]) for i in range(5)],
    [("user", [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}])],
    [("user", "show me"), ("assistant", [IMAGE, {"type": "text", "text": "here"}])],
    [
        ("user", "add"),
        ("assistant", [{**TOOL_USE, "id": "tool use 1"}]),
        ("user", [{"type": "tool_result", "tool_use_id": "tool use 1", "content": "ok"}]),
    ],
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("messages", ARCHIVED_HOSTILE, ids=["5 cache_control", "forever", "image", "tool id"])
def test_an_archive_holding_what_the_api_refuses_never_fails_a_later_turn(fake_anthropic, session, messages):
    """Such messages reach the archive only from an older import; the window cleans them, every call."""
    for role, content in messages:
        message_append(session=session, role=role, content=content)
    fake_anthropic.queue_text("fine")
    result = turn_run(session=session, text="and now?")
    assert result.reply == "fine"
    body = fake_anthropic.requests[-1]["body"]
    assert "forever" not in json.dumps(body)
    blocks = [block for message in body["messages"] for block in message["content"]]
    assert not [block for block in blocks if block.get("type") == "tool_use"]
