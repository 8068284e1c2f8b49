"""Memory notes through turns against the fake Messages API: what each request holds, the prompt cache,
isolation between chats and users, and the fake refusing a memory tool sent any other way."""

from __future__ import annotations

import json

import anthropic
import pytest

from conversations.models import ModelCall
from conversations.services import session_get_or_create
from devtools.fake_anthropic import FakeAnthropic
from memory.models import Note, NoteProposal
from memory.notes.proposals import note_proposal_answer
from tests.memory.turns import post

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = {"command": "create", "path": "/memories/trip.md", "file_text": "Trip to Lisbon in May"}
PROFILE_NOTE = {"command": "create", "path": "/memories/profile/name.md", "file_text": "Call me Al"}


@pytest.fixture(autouse=True)
def _five_minute_cache(settings):
    settings.BUDDY_CACHE_TTL = "5m"


def context_block(request) -> str:
    return request["body"]["messages"][-1]["content"][-1]["text"]


def prefix_through_tail(call: ModelCall) -> int:
    """Tokens of a call's prompt up to its last breakpoint: what it read from the cache plus what it wrote."""
    return call.cache_read_input_tokens + call.cache_creation_input_tokens


def last_call() -> ModelCall:
    return ModelCall.objects.order_by("-id").first()


def test_a_note_the_model_makes_is_in_the_next_context_block_and_never_breaks_the_cache(api, model, user):
    model.queue_tool_call("memory", NOTE)
    model.queue_text("Noted.")
    assert post(api, "I plan a trip to Lisbon in May")["reply"] == "Noted."
    sent_tools = [t for t in model.requests[0]["body"]["tools"] if t["name"] == "memory"]
    assert sent_tools == [{"type": "memory_20250818", "name": "memory"}]
    assert "anthropic-beta" not in model.requests[0]["headers"]  # a tool of the Messages API itself
    note = Note.objects.get()
    assert note.source_message.content[-1]["name"] == "memory"
    assert "/memories/trip.md\nTrip to Lisbon in May" in context_block(model.requests[1])

    post(api, "Anything else?")
    before = last_call()
    assert "/memories/trip.md\nTrip to Lisbon in May" in context_block(model.last_request)
    assert prefix_through_tail(before) > 1024  # long enough to be cached at all

    # The user changes the note: the next call holds the new text and reads the whole previous prefix.
    changed = api.put(
        "/memory/notes",
        {"scope": "chat", "path": "/memories/trip.md", "content": "Trip to Lisbon in June"},
        content_type="application/json",
    )
    assert changed.status_code == 200, changed.content
    post(api, "And now?")
    assert "Trip to Lisbon in June" in context_block(model.last_request)
    assert last_call().cache_read_input_tokens == prefix_through_tail(before)

    # The user deletes it: the following request no longer holds it, and still reads the cache as before.
    before = last_call()
    deleted = api.delete("/memory/notes?scope=chat&path=/memories/trip.md")
    assert deleted.status_code == 204
    post(api, "Still there?")
    assert "/memories/trip.md" not in context_block(model.last_request)
    assert "Your memory notes" not in context_block(model.last_request)
    assert last_call().cache_read_input_tokens == prefix_through_tail(before)


def test_a_chat_note_stays_in_its_chat_and_with_its_user(api, model, user, other_user, client):
    model.queue_tool_call("memory", NOTE)
    model.queue_text("Noted.")
    post(api, "Remember the trip", chat_id="a")
    post(api, "hello", chat_id="b")
    assert "Lisbon" not in json.dumps(model.last_request["body"])
    client.force_login(other_user)
    post(client, "hello", chat_id="a")
    assert "Lisbon" not in json.dumps(model.last_request["body"])


def test_a_profile_note_reaches_every_chat_only_after_a_yes(api, model, user):
    model.queue_tool_call("memory", PROFILE_NOTE)
    model.queue_text("I asked you first.")
    post(api, "I am Al", chat_id="a")
    assert "Not saved yet" in json.dumps(model.requests[1]["body"]["messages"][-1])
    post(api, "hello", chat_id="b")
    assert "Call me Al" not in json.dumps(model.last_request["body"])

    chat_a = session_get_or_create(user=user, agent_slug="buddy", chat_id="a")
    proposal = NoteProposal.objects.get()
    assert note_proposal_answer(session=chat_a, element_id=proposal.element_id, confirmed=True).status == "applied"
    for chat_id in ("b", "c"):
        post(api, "who am I?", chat_id=chat_id)
        assert "/memories/profile/name.md\nCall me Al" in context_block(model.last_request)
    note = Note.objects.get()
    assert (note.scope, note.session, note.updated_by) == ("profile", None, "model")
    assert note.source_message.session == chat_a


def test_a_declined_profile_note_is_never_applied(api, model, user):
    model.queue_tool_call("memory", PROFILE_NOTE)
    model.queue_text("I asked you first.")
    post(api, "I am Al", chat_id="a")
    chat_a = session_get_or_create(user=user, agent_slug="buddy", chat_id="a")
    proposal = NoteProposal.objects.get()
    assert note_proposal_answer(session=chat_a, element_id=proposal.element_id, confirmed=False).status == "declined"
    again = note_proposal_answer(session=chat_a, element_id=proposal.element_id, confirmed=True)
    assert again.status == "declined"
    post(api, "who am I?", chat_id="b")
    assert "Call me Al" not in json.dumps(model.last_request["body"])
    assert not Note.objects.exists()


@pytest.fixture
def server():
    with FakeAnthropic() as fake:
        yield fake


def ask(client, tools, *, beta=False):
    messages = client.beta.messages if beta else client.messages
    return messages.create(
        model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}], tools=tools
    )


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ({"type": "memory_20250101", "name": "memory"}, "Input tag 'memory_20250101'"),
        ({"type": "memory", "name": "memory"}, "Input tag 'memory'"),
        ({"type": "memory_20250818", "name": "notes"}, "memory_20250818.name: Input should be 'memory'"),
        (
            {"type": "memory_20250818", "name": "memory", "input_schema": {"type": "object"}},
            "memory_20250818.input_schema: Extra inputs are not permitted",
        ),
    ],
)
def test_the_fake_refuses_a_memory_tool_sent_any_other_way(server, tool, why):
    client = server.client()
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(client, [tool])
    assert refused.value.status_code == 400 and why in str(refused.value)
    assert ask(client, [{"type": "memory_20250818", "name": "memory"}]).content  # the right way is answered
    assert ask(client, [{"type": "memory_20250818", "name": "memory"}], beta=True).content
