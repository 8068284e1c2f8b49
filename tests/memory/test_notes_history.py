"""export_history / import_history carry a chat's notes: export → import → export gives the same lines."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations.models import Message
from conversations.services import message_append
from memory.models import Note
from memory.notes.services import note_put

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_notes_travel_with_their_chat_and_round_trip(tmp_path, session, user):
    message_append(session=session, role="user", content="I like tea")
    source = message_append(session=session, role="assistant", content="Noted.")
    note_put(
        user=user, session=session, path="/memories/tea.md", content="Likes tea\nnot coffee", by="model", source=source
    )
    note_put(user=user, session=session, path="/memories/zz.md", content="by hand")
    note_put(user=user, session=None, path="/memories/profile/name.md", content="Al")  # the user's: stays
    first = run("export_history", "--user", "alice")
    lines = [json.loads(line) for line in first.splitlines()]
    assert [line.get("role") for line in lines] == ["user", "assistant", None, None]
    assert lines[2]["note"] | {"updated_at": None} == {
        "path": "/memories/tea.md",
        "content": "Likes tea\nnot coffee",
        "updated_at": None,
        "updated_by": "model",
        "source": 2,
    }
    (tmp_path / "out.jsonl").write_text(first, encoding="utf-8")
    run("import_history", str(tmp_path / "out.jsonl"), "--user", "alice", "--chat-id", "copy")
    copied = Note.objects.get(session__chat_id="copy", path="/memories/tea.md")
    assert copied.source_message.session.chat_id == "copy" and copied.source_message.content[0]["text"] == "Noted."
    assert run("export_history", "--user", "alice", "--chat-id", "copy") == first


@pytest.mark.parametrize(
    ("note", "reason"),
    [
        (
            {"path": "/memories/../x", "content": "x", "updated_at": "2026-01-01T00:00:00Z", "updated_by": "user"},
            "'..'",
        ),
        (
            {"path": "/memories/profile/x", "content": "x", "updated_at": "2026-01-01T00:00:00Z", "updated_by": "user"},
            "profile",
        ),
        (
            {"path": "/memories/x", "content": "x" * 9000, "updated_at": "2026-01-01T00:00:00Z", "updated_by": "user"},
            "8,192",
        ),
        ({"path": "/memories/x", "content": "x", "updated_at": "soon", "updated_by": "user"}, "ISO-8601"),
        (
            {"path": "/memories/x", "content": "x", "updated_at": "2026-01-01T00:00:00Z", "updated_by": "me"},
            "updated_by",
        ),
    ],
)
def test_a_bad_note_line_imports_nothing_and_names_its_line(tmp_path, user, note, reason):
    lines = [json.dumps({"role": "user", "content": "hi"}), json.dumps({"note": {**note, "source": None}})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=rf"line 2: note: .*{reason}"):
        run("import_history", str(tmp_path / "in.jsonl"), "--user", "alice")
    assert not Note.objects.exists()


def test_an_updated_at_past_year_9999_in_utc_imports_nothing_and_names_its_line(tmp_path, user):
    note = {
        "path": "/memories/x",
        "content": "x",
        "updated_at": "9999-12-31T23:59:59-14:00",
        "updated_by": "user",
        "source": None,
    }
    lines = [json.dumps({"role": "user", "content": "hi"}), json.dumps({"note": note})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 2: note: updated_at is not an ISO-8601 date-time between years 1"):
        run("import_history", str(tmp_path / "in.jsonl"), "--user", "alice")
    assert not Note.objects.exists() and not Message.objects.exists()


def test_a_note_line_before_a_message_imports_nothing_and_names_its_line(tmp_path, user):
    note = {"path": "/memories/x", "content": "x", "updated_at": "2026-01-01T00:00:00Z", "updated_by": "user"}
    lines = [
        json.dumps({"role": "user", "content": "hi"}),
        json.dumps({"note": {**note, "source": None}}),
        json.dumps({"role": "assistant", "content": "hello"}),
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 2: note: a note line comes before the message on line 3; note lines"):
        run("import_history", str(tmp_path / "in.jsonl"), "--user", "alice")
    assert not Note.objects.exists() and not Message.objects.exists()
