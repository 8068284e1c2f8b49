"""A reply that drew on the archive lists those messages (`sources`), and `/history?around=ID` opens a
chat at one of them."""

from __future__ import annotations

import pytest

from conversations.content import SNIPPET_MAX_CHARS, snippet
from conversations.provenance import MEMORY_TOOL_NAMES, turn_sources
from conversations.services import message_append, session_get_or_create
from memory.notes.services import note_put
from memory.notes.tool import MEMORY_TOOL_NAME
from memory.tools import MEMORY_INPUTS
from tests.memory.turns import post

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reply_that_searched_lists_the_messages_it_found(api, model, session):
    said = message_append(session=session, role="user", content="The pricing plan is forty euros a month")
    message_append(session=session, role="assistant", content="Got it.")
    model.queue_tool_call("search_history", {"query": "pricing plan"})
    model.queue_text("It was forty euros.")
    reply = post(api, "What did we say about pricing?")
    sources = turn_sources(session=session, reply_id=reply["message_id"])
    found = {source["id"]: source for source in sources}
    assert (found[said.id]["chat_id"], found[said.id]["agent"], found[said.id]["role"]) == ("main", "buddy", "user")
    assert all(source_id <= said.id + 1 for source_id in found)  # the archive, never the turn's own messages
    assert found[said.id]["snippet"] == "The pricing plan is forty euros a month"
    page = api.get("/history").json()["messages"]
    by_id = {m["id"]: m for m in page}
    assert [s["id"] for s in by_id[reply["message_id"]]["sources"]] == [s["id"] for s in sources]
    assert [s["snippet"] for s in by_id[reply["message_id"]]["sources"]] == [s["snippet"] for s in sources]
    assert all(m["sources"] == [] for m in page if m["id"] != reply["message_id"])

    post(api, "thanks")  # a turn that used no memory tool lists nothing
    assert api.get("/history").json()["messages"][-1]["sources"] == []


def test_a_viewed_note_names_the_message_it_was_kept_from_even_in_another_chat(api, model, session, user):
    elsewhere = session_get_or_create(user=user, agent_slug="buddy", chat_id="other")
    kept_from = message_append(session=elsewhere, role="assistant", content="I will remember your name.")
    note_put(user=user, session=None, path="/memories/profile/name.md", content="Al", by="model", source=kept_from)
    model.queue_tool_call("memory", {"command": "view", "path": "/memories/profile/name.md"})
    model.queue_text("You are Al.")
    reply = post(api, "Who am I?")
    [source] = turn_sources(session=session, reply_id=reply["message_id"])
    assert (source["id"], source["chat_id"]) == (kept_from.id, "other")


def test_another_users_message_is_never_a_source(api, model, session, other_user):
    theirs = message_append(
        session=session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main"), role="user", content="x"
    )
    model.queue_tool_call("get_extended_context", {})
    model.queue_text("done")
    model.responder = None
    message_append(session=session, role="user", content=f"quoting [#{theirs.id} 2026-01-01 00:00 user] x")
    message_append(session=session, role="assistant", content="ok")
    reply = post(api, "go")
    assert turn_sources(session=session, reply_id=reply["message_id"]) == []


def test_history_around_a_message_is_a_page_centred_on_it(api, session):
    ids = [
        message_append(session=session, role="user" if n % 2 == 0 else "assistant", content=f"m{n}").id
        for n in range(30)
    ]
    page = api.get(f"/history?around={ids[15]}&limit=10").json()
    assert [m["id"] for m in page["messages"]] == ids[10:20]
    assert page["next_before"] == ids[10]
    page = api.get(f"/history?around={ids[1]}&limit=10").json()
    assert [m["id"] for m in page["messages"]] == ids[0:10] and page["next_before"] is None
    assert api.get("/history?around=999999999&limit=10").status_code == 404
    other = session_get_or_create(user=session.user, agent_slug="buddy", chat_id="b")
    foreign = message_append(session=other, role="user", content="elsewhere")
    assert api.get(f"/history?around={foreign.id}").status_code == 404  # of another chat: not this page


def test_the_archive_knows_every_memory_tool_that_cites_messages():
    assert {*MEMORY_INPUTS, MEMORY_TOOL_NAME} == MEMORY_TOOL_NAMES


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Plain  text\nover\tlines", "Plain text over lines"),
        ([{"type": "text", "text": "<b>bold</b> & more"}], "<b>bold</b> & more"),  # plain text: the page escapes it
        ([{"type": "tool_use", "id": "t", "name": "search_history", "input": {"query": "pricing"}}], "pricing"),
        ([{"type": "tool_result", "tool_use_id": "t", "content": "3 results"}], "3 results"),
        ("", ""),
    ],
)
def test_a_snippet_is_one_line_of_what_a_message_said(content, expected):
    assert snippet(content) == expected


def test_a_long_snippet_is_cut_at_a_word_with_an_ellipsis():
    line = snippet("word " * 100)
    assert len(line) <= SNIPPET_MAX_CHARS and line.endswith("word…")
    assert snippet("x" * 500).endswith("…") and len(snippet("x" * 500)) == SNIPPET_MAX_CHARS
