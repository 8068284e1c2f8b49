"""The memory tool run over the notes: every command, and hostile input refused with a clear
`is_error` result and nothing stored."""

from __future__ import annotations

import pytest

from agent.tools import tool_definitions, tool_round_run
from canvas.selectors import canvas_state
from conversations.content import estimate_tokens, json_text_cleaned
from conversations.services import message_append, session_get_or_create
from memory.models import Note, NoteProposal, NoteVersion
from memory.notes.paths import NOTE_MAX_BYTES
from memory.notes.selectors import notes_context_text
from memory.notes.services import note_put
from memory.notes.tool import MEMORY_TOOL, NotesMemoryTool

pytestmark = pytest.mark.django_db


def run(session, tool_input) -> dict:
    """One memory tool call as a turn runs it: its tool_result block. (A turn archives what the model
    said with NUL and lone surrogates replaced; the tool gets the raw input here, to refuse it too.)"""
    source = message_append(
        session=session,
        role="assistant",
        content=json_text_cleaned([{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": tool_input}]),
    )
    result = tool_round_run(
        session=session,
        tool_uses=[{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": tool_input}],
        source=source,
    )
    return result.content[0]


def ok(session, tool_input) -> str:
    block = run(session, tool_input)
    assert not block.get("is_error"), block["content"]
    return block["content"]


def refused(session, tool_input) -> str:
    before = (Note.objects.count(), NoteVersion.objects.count(), NoteProposal.objects.count())
    block = run(session, tool_input)
    assert block.get("is_error") is True, block["content"]
    assert (Note.objects.count(), NoteVersion.objects.count(), NoteProposal.objects.count()) == before
    return block["content"]


def content(session, path="/memories/a.md") -> str:
    return Note.objects.get(session=session, path=path).content


def test_the_tool_is_sent_as_the_sdk_types_it_and_the_sdk_base_class_gives_the_same():
    sent = [tool for tool in tool_definitions() if tool.get("name") == "memory"]
    assert sent == [{"type": "memory_20250818", "name": "memory"}]
    assert NotesMemoryTool(session=None, source=None).to_dict() == MEMORY_TOOL


def test_create_view_str_replace_insert_rename_and_delete(session):
    ok(session, {"command": "create", "path": "/memories/a.md", "file_text": "likes tea\nlives in Porto"})
    note = Note.objects.get(session=session)
    assert (note.scope, note.updated_by) == ("chat", "model")
    assert note.source_message.content[0]["id"] == "toolu_1"
    assert "     2\tlives in Porto" in ok(session, {"command": "view", "path": "/memories/a.md"})
    assert "/memories/a.md" in ok(session, {"command": "view", "path": "/memories"})
    ok(session, {"command": "str_replace", "path": "/memories/a.md", "old_str": "tea", "new_str": "green tea"})
    assert content(session) == "likes green tea\nlives in Porto"
    ok(session, {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "cycles\n"})
    assert content(session) == "likes green tea\ncycles\nlives in Porto"
    ok(session, {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/people/me.md"})
    assert content(session, "/memories/people/me.md").startswith("likes green tea")
    ok(session, {"command": "delete", "path": "/memories/people"})
    assert not Note.objects.exists()
    # Every change kept a version: create, replace, insert, rename (delete + create), delete.
    assert NoteVersion.objects.filter(session=session).count() == 6
    assert set(NoteVersion.objects.values_list("changed_by", flat=True)) == {"model"}


@pytest.mark.parametrize(
    ("tool_input", "why"),
    [
        ({"command": "create", "path": "/memories/../etc/passwd", "file_text": "x"}, "'..'"),
        ({"command": "create", "path": "/memories/a/../../b.md", "file_text": "x"}, "'..'"),
        ({"command": "create", "path": "/etc/passwd", "file_text": "x"}, "outside /memories/"),
        ({"command": "create", "path": "/memoriesX/a.md", "file_text": "x"}, "outside /memories/"),
        ({"command": "create", "path": "memories/a.md", "file_text": "x"}, "outside /memories/"),
        ({"command": "create", "path": "/memories/a.md", "file_text": "x" * (9 * 1024)}, f"{NOTE_MAX_BYTES:,} bytes"),
        ({"command": "create", "path": "/memories/a.md", "file_text": "nul \x00 here"}, "NUL"),
        ({"command": "create", "path": "/memories/a\x00.md", "file_text": "x"}, "NUL"),
        ({"command": "create", "path": "/memories/a.md", "file_text": "half \ud800 a pair"}, "lone surrogate"),
        ({"command": "create", "path": "/memories/" + "a" * 200, "file_text": "x"}, "200 characters"),
        ({"command": "create", "path": "/memories/a;rm.md", "file_text": "x"}, "only letters"),
        ({"command": "create", "path": "/memories/", "file_text": "x"}, "is a directory"),
        ({"command": "create", "path": "/memories/a.md"}, "file_text: Field required"),
        ({"command": "create", "path": 7, "file_text": "x"}, "path: Input should be a valid string"),
        ({"command": "format", "path": "/memories/a.md"}, "does not match any of the expected tags"),
        ({"command": "delete", "path": "/memories"}, "cannot be deleted"),
        ({"command": "view", "path": "/memories/none.md"}, "does not exist"),
        ({"command": "str_replace", "path": "/memories/none.md", "old_str": "a", "new_str": "b"}, "does not exist"),
        ({"command": "insert", "path": "/memories/a.md", "insert_line": "1", "insert_text": "x"}, "insert_line"),
    ],
)
def test_hostile_input_is_a_clear_error_and_stores_nothing(session, tool_input, why):
    text = refused(session, tool_input)
    assert text.startswith("memory")
    assert "nothing changed" in text
    assert why in text


def test_a_string_that_occurs_twice_is_not_replaced(session):
    ok(session, {"command": "create", "path": "/memories/a.md", "file_text": "tea\ncoffee\ntea"})
    text = refused(session, {"command": "str_replace", "path": "/memories/a.md", "old_str": "tea", "new_str": "x"})
    assert "occurs 2 times" in text and "lines 1, 3" in text
    assert content(session) == "tea\ncoffee\ntea"


def test_an_edit_that_would_make_a_note_too_big_is_refused(session):
    ok(session, {"command": "create", "path": "/memories/a.md", "file_text": "x" * (NOTE_MAX_BYTES - 10)})
    text = refused(session, {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "y" * 20})
    assert "at most 8,192 bytes" in text


def test_the_101st_note_of_a_scope_is_refused(session):
    for number in range(100):
        note_put(user=session.user, session=session, path=f"/memories/n{number}.md", content="x")
    text = refused(session, {"command": "create", "path": "/memories/one-more.md", "file_text": "x"})
    assert "already 100 chat notes" in text
    ok(session, {"command": "create", "path": "/memories/n5.md", "file_text": "changed"})  # a change still works
    other_chat = session_get_or_create(user=session.user, agent_slug="buddy", chat_id="other")
    ok(other_chat, {"command": "create", "path": "/memories/fresh.md", "file_text": "own 100"})


def test_a_note_cannot_also_be_a_directory(session):
    ok(session, {"command": "create", "path": "/memories/a", "file_text": "x"})
    assert "is a note" in refused(session, {"command": "create", "path": "/memories/a/b.md", "file_text": "x"})


def test_a_profile_write_becomes_a_canvas_confirmation_and_is_not_applied(session):
    text = ok(session, {"command": "create", "path": "/memories/profile/name.md", "file_text": "Call me Al"})
    assert "Not saved yet" in text
    assert not Note.objects.exists()
    proposal = NoteProposal.objects.get()
    assert proposal.status == "pending"
    [element] = canvas_state(session=session)["elements"]
    assert element["type"] == "confirmation" and element["id"] == proposal.element_id
    assert element["title"] == "Remember in all chats?"
    assert element["message"].endswith(
        "/memories/profile/name.md, where every chat with every agent sees it:\n\nCall me Al"
    )


def test_a_profile_write_that_could_never_apply_is_refused_at_once(session):
    edit = {"command": "str_replace", "path": "/memories/profile/x.md", "old_str": "a", "new_str": "b"}
    text = refused(session, edit)
    assert "does not exist" in text
    assert canvas_state(session=session)["elements"] == []


def test_the_context_block_shows_notes_whole_within_the_budget_then_first_lines(session, settings):
    settings.BUDDY_NOTES_TOKENS = 130
    note_put(user=session.user, session=session, path="/memories/a.md", content="short one\nsecond line")
    note_put(user=session.user, session=session, path="/memories/b.md", content="long first line\n" + "x" * 400)
    note_put(user=session.user, session=None, path="/memories/profile/p.md", content="profile\nmore")
    text = notes_context_text(session=session)
    assert estimate_tokens(text) <= 130
    assert "--- /memories/a.md\nshort one\nsecond line" in text
    assert "--- /memories/b.md (first line; view it for the rest)\nlong first line\n" in text
    assert "x" * 50 not in text
    assert "--- /memories/profile/p.md\nprofile\nmore" in text
    assert "not shown here" not in text
    other = session_get_or_create(user=session.user, agent_slug="buddy", chat_id="other")
    assert "/memories/a.md" not in notes_context_text(session=other)
    assert "/memories/profile/p.md" in notes_context_text(session=other)


def test_the_notes_block_never_exceeds_its_budget_and_says_what_it_left_out(session, settings):
    """The worst case: 100 notes in each scope, each a single long line under a long path."""
    for scope_session, directory in ((session, "/memories/"), (None, "/memories/profile/")):
        for number in range(100):
            path = directory + f"{number:03d}-" + "p" * (180 - len(directory))
            note_put(user=session.user, session=scope_session, path=path, content=f"{number} " + "y" * 8000)
    text = notes_context_text(session=session)
    assert estimate_tokens(text) <= settings.BUDDY_NOTES_TOKENS == 2000
    shown = text.count("\n--- ")
    assert 0 < shown < 200
    assert text.endswith(
        f"({200 - shown} of the 200 memory notes are not shown here, to keep this short: the memory tool's "
        "view of /memories lists them all, and view of a note's path reads it.)"
    )
    for budget in (1, 40, 100, 500):
        settings.BUDDY_NOTES_TOKENS = budget
        assert estimate_tokens(notes_context_text(session=session)) <= budget
