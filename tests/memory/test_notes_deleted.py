"""Deleted notes can always be undone: listed with their last text (`GET /memory/notes?deleted=1`) and
restored by path or version, keeping the message their text came from; never another user's."""

from __future__ import annotations

import pytest

from conversations.services import message_append, session_get_or_create
from memory.models import Note
from memory.notes.paths import DELETED_NOTES_KEPT
from memory.notes.services import note_delete, note_put

pytestmark = pytest.mark.django_db


def restore(client, **body):
    return client.post("/memory/notes/restore", body, content_type="application/json")


def deleted(client, **query) -> dict:
    response = client.get("/memory/notes", {"deleted": "1", **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_deleted_notes_of_both_scopes_are_listed_as_they_were(api, session, user):
    source = message_append(session=session, role="assistant", content="noted")
    note_put(user=user, session=session, path="/memories/plan.md", content="old plan", by="model", source=source)
    note_put(user=user, session=session, path="/memories/plan.md", content="the plan", by="model", source=source)
    note_put(user=user, session=None, path="/memories/profile/tea.md", content="green tea")
    note_put(user=user, session=session, path="/memories/live.md", content="stays")
    note_delete(user=user, session=session, path="/memories/plan.md", by="model", source=source)
    note_delete(user=user, session=None, path="/memories/profile/tea.md")
    body = deleted(api)
    [plan] = body["chat"]
    assert plan | {"updated_at": None, "deleted_at": None, "version_id": None} == {
        "path": "/memories/plan.md",
        "content": "the plan",
        "updated_at": None,
        "updated_by": "model",
        "source_message_id": source.id,
        "source_prompt_id": None,  # the chat has no prompt before that message
        "source_agent": "buddy",
        "source_chat_id": "main",
        "deleted_at": None,
        "deleted_by": "model",
        "version_id": None,
    }
    assert plan["deleted_at"] >= plan["updated_at"]
    assert [(n["path"], n["content"], n["deleted_by"], n["source_message_id"]) for n in body["profile"]] == [
        ("/memories/profile/tea.md", "green tea", "user", None)
    ]
    # The live notes are not deleted ones, and the plain list is unchanged.
    assert [n["path"] for n in api.get("/memory/notes").json()["chat"]] == ["/memories/live.md"]


def test_the_most_recently_deleted_come_first_and_a_path_made_again_is_not_deleted(api, session, user):
    for name in ("a", "b", "c"):
        note_put(user=user, session=session, path=f"/memories/{name}.md", content=name)
        note_delete(user=user, session=session, path=f"/memories/{name}.md")
    note_put(user=user, session=session, path="/memories/b.md", content="b again")
    assert [n["path"] for n in deleted(api)["chat"]] == ["/memories/c.md", "/memories/a.md"]


def test_the_deleted_list_is_bounded(api, session, user):
    for number in range(DELETED_NOTES_KEPT + 3):
        note_put(user=user, session=session, path=f"/memories/gone/{number}.md", content=f"gone {number}")
        note_delete(user=user, session=session, path=f"/memories/gone/{number}.md")
    chat = deleted(api)["chat"]
    assert len(chat) == DELETED_NOTES_KEPT
    assert chat[0]["path"] == f"/memories/gone/{DELETED_NOTES_KEPT + 2}.md"


def test_a_deleted_note_restored_by_path_keeps_its_source(api, session, user):
    source = message_append(session=session, role="assistant", content="noted")
    note_put(user=user, session=session, path="/memories/plan.md", content="the plan", by="model", source=source)
    assert api.delete("/memory/notes?scope=chat&path=/memories/plan.md").status_code == 204
    response = restore(api, scope="chat", path="/memories/plan.md")
    assert response.status_code == 200, response.content
    note = response.json()
    assert (note["content"], note["updated_by"], note["source_message_id"]) == ("the plan", "user", source.id)
    assert deleted(api)["chat"] == []
    # Deleted and restored again, it still knows where its text came from.
    assert api.delete("/memory/notes?scope=chat&path=/memories/plan.md").status_code == 204
    assert deleted(api)["chat"][0]["source_message_id"] == source.id
    assert restore(api, scope="chat", path="/memories/plan.md").json()["source_message_id"] == source.id
    # A version of the model's text restored by id keeps its source too.
    versions = api.get("/memory/notes/versions?scope=chat&path=/memories/plan.md").json()["versions"]
    first = versions[-1]
    assert first["changed_by"] == "model"
    assert restore(api, version_id=first["id"]).json()["source_message_id"] == source.id


def test_a_profile_note_is_restored_by_path_without_a_chat(api, user):
    note_put(user=user, session=None, path="/memories/profile/tea.md", content="green tea")
    note_delete(user=user, session=None, path="/memories/profile/tea.md")
    response = restore(api, scope="profile", path="/memories/profile/tea.md", chat_id="never-made")
    assert response.status_code == 200 and response.json()["content"] == "green tea"
    assert Note.objects.get().session is None


def test_a_restore_whose_path_holds_another_note_is_a_conflict(api, session, user):
    note_put(user=user, session=session, path="/memories/plan.md", content="first")
    note_delete(user=user, session=session, path="/memories/plan.md")
    note_put(user=user, session=session, path="/memories/plan.md", content="second")
    response = restore(api, scope="chat", path="/memories/plan.md")
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    assert "/memories/plan.md holds another note now" in response.json()["detail"]
    assert Note.objects.get().content == "second"


def test_a_restore_into_a_full_scope_is_a_conflict(api, session, user):
    note_put(user=user, session=session, path="/memories/gone.md", content="gone")
    note_delete(user=user, session=session, path="/memories/gone.md")
    for number in range(100):
        note_put(user=user, session=session, path=f"/memories/n{number}.md", content="x")
    response = restore(api, scope="chat", path="/memories/gone.md")
    assert response.status_code == 409
    assert response.json()["detail"].startswith("/memories/gone.md cannot be restored: there are already 100")
    assert not Note.objects.filter(path="/memories/gone.md").exists()


def test_a_path_never_deleted_is_a_404(api, session):
    response = restore(api, scope="chat", path="/memories/never.md")
    assert response.status_code == 404 and "no deleted note /memories/never.md" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({}, "name the version to restore"),
        ({"scope": "chat"}, "name the version to restore"),
        ({"version_id": 1, "scope": "chat", "path": "/memories/a.md"}, "not both"),
        ({"scope": "profile", "path": "/memories/a.md"}, "a chat note's path"),
        ({"scope": "chat", "path": "/memories/../a.md"}, "'..'"),
    ],
)
def test_a_restore_that_names_nothing_or_two_things_is_a_422(api, session, body, why):
    response = restore(api, **body)
    assert response.status_code == 422, response.content
    assert why in str(response.json())


def test_another_users_deleted_notes_are_never_listed_or_restored(api, session, user, other_user):
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    note_put(user=other_user, session=theirs, path="/memories/secret.md", content="theirs")
    note_delete(user=other_user, session=theirs, path="/memories/secret.md")
    note_put(user=other_user, session=None, path="/memories/profile/secret.md", content="theirs")
    note_delete(user=other_user, session=None, path="/memories/profile/secret.md")
    # Another chat of this user keeps its own deleted notes too.
    elsewhere = session_get_or_create(user=user, agent_slug="buddy", chat_id="elsewhere")
    note_put(user=user, session=elsewhere, path="/memories/secret.md", content="other chat")
    note_delete(user=user, session=elsewhere, path="/memories/secret.md")
    assert deleted(api) == {"chat": [], "profile": []}
    assert restore(api, scope="chat", path="/memories/secret.md").status_code == 404
    assert restore(api, scope="profile", path="/memories/profile/secret.md").status_code == 404
    assert not Note.objects.exists()
    assert [n["content"] for n in deleted(api, chat_id="elsewhere")["chat"]] == ["other chat"]


def test_the_deleted_list_of_a_missing_chat_is_a_404(api, session):
    assert api.get("/memory/notes", {"deleted": "1", "chat_id": "never-made"}).status_code == 404
