"""The memory notes over HTTP: both scopes, writes, deletes, versions, restore; bad input is a clear 4xx."""

from __future__ import annotations

import pytest

from conversations.services import message_append, session_get_or_create
from memory.models import Note, NoteVersion
from memory.notes.paths import DELETED_NOTES_KEPT, NOTE_VERSIONS_KEPT
from memory.notes.services import note_delete, note_put

pytestmark = pytest.mark.django_db


def put(client, **body):
    return client.put("/memory/notes", body, content_type="application/json")


def test_notes_of_both_scopes_are_listed_with_where_they_came_from(api, session, user):
    prompt = message_append(session=session, role="user", content="Remember my plans")
    message_append(session=session, role="assistant", content="Thinking")
    source = message_append(session=session, role="assistant", content="noted")
    note_put(user=user, session=session, path="/memories/a.md", content="chat text", by="model", source=source)
    note_put(user=user, session=None, path="/memories/profile/p.md", content="profile text")
    body = api.get("/memory/notes").json()
    assert [n["path"] for n in body["chat"]] == ["/memories/a.md"]
    assert body["chat"][0] | {"updated_at": None} == {
        "path": "/memories/a.md",
        "content": "chat text",
        "updated_at": None,
        "updated_by": "model",
        "source_message_id": source.id,
        "source_prompt_id": prompt.id,  # the person's message the note came from: its turn's prompt
        "source_agent": "buddy",
        "source_chat_id": "main",
    }
    assert [(n["path"], n["updated_by"], n["source_message_id"]) for n in body["profile"]] == [
        ("/memories/profile/p.md", "user", None)
    ]
    [version] = api.get("/memory/notes/versions?scope=chat&path=/memories/a.md").json()["versions"]
    assert (version["source_message_id"], version["source_prompt_id"]) == (source.id, prompt.id)


def test_put_delete_versions_and_restore(api, session):
    assert put(api, scope="chat", path="/memories/a.md", content="one").status_code == 200
    assert put(api, scope="chat", path="/memories/a.md", content="two").json()["content"] == "two"
    assert api.delete("/memory/notes?scope=chat&path=/memories/a.md").status_code == 204
    assert api.get("/memory/notes").json()["chat"] == []
    versions = api.get("/memory/notes/versions?scope=chat&path=/memories/a.md").json()["versions"]
    assert [(v["before"], v["after"], v["changed_by"]) for v in versions] == [
        ("two", None, "user"),
        ("one", "two", "user"),
        (None, "one", "user"),
    ]
    restored = api.post("/memory/notes/restore", {"version_id": versions[2]["id"]}, content_type="application/json")
    assert restored.status_code == 200 and restored.json()["content"] == "one"
    restored = api.post("/memory/notes/restore", {"version_id": versions[0]["id"]}, content_type="application/json")
    assert restored.json()["content"] == "two"  # a deletion's version restores what it deleted
    assert NoteVersion.objects.count() == 5
    for not_an_id in (True, False):  # `true` is not version 1
        refused = api.post("/memory/notes/restore", {"version_id": not_an_id}, content_type="application/json")
        assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "version_id"
    assert NoteVersion.objects.count() == 5


def test_a_profile_note_needs_no_chat(api, user):
    response = put(api, scope="profile", path="/memories/profile/p.md", content="x", chat_id="never-made")
    assert response.status_code == 200
    assert Note.objects.get().session is None


@pytest.mark.parametrize(
    ("body", "status", "why"),
    [
        ({"scope": "chat", "path": "/memories/../x.md", "content": "x"}, 422, "'..'"),
        ({"scope": "chat", "path": "/etc/passwd", "content": "x"}, 422, "outside /memories/"),
        ({"scope": "chat", "path": "/memories/a.md", "content": "x" * 9 * 1024}, 422, "at most 8,192 bytes"),
        ({"scope": "chat", "path": "/memories/a.md", "content": "a\x00b"}, 422, "NUL"),
        ({"scope": "chat", "path": "/memories/profile/a.md", "content": "x"}, 422, "a profile note's path"),
        ({"scope": "profile", "path": "/memories/a.md", "content": "x"}, 422, "a chat note's path"),
        ({"scope": "other", "path": "/memories/a.md", "content": "x"}, 422, "scope"),
        ({"scope": "chat", "path": "/memories/a.md", "content": "x", "chat_id": "none"}, 404, "No such chat"),
    ],
)
def test_bad_writes_are_clear_errors_and_store_nothing(api, session, body, status, why):
    response = put(api, **body)
    assert response.status_code == status, response.content
    assert why in str(response.json()["detail"])
    assert not Note.objects.exists()


def test_a_lone_surrogate_is_a_422(api, session):
    raw = '{"scope": "chat", "path": "/memories/a.md", "content": "half \\ud800"}'
    response = api.put("/memory/notes", raw, content_type="application/json")
    assert response.status_code == 422
    assert not Note.objects.exists()


def test_a_write_the_stored_notes_refuse_is_a_409_conflict(api, session, user):
    """The request is well formed (the schema allows it): what is stored refuses it."""
    note_put(user=user, session=session, path="/memories/n0.md", content="x")
    response = put(api, scope="chat", path="/memories/n0.md/under.md", content="x")
    assert response.status_code == 409 and "/memories/n0.md is a note" in response.json()["detail"]
    for number in range(1, 100):
        note_put(user=user, session=session, path=f"/memories/n{number}.md", content="x")
    response = put(api, scope="chat", path="/memories/more.md", content="x")
    assert response.status_code == 409 and "already 100 chat notes" in response.json()["detail"]
    assert response.json()["code"] == "conflict"


def test_another_users_notes_and_versions_are_out_of_reach(api, session, other_user):
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    note_put(user=other_user, session=theirs, path="/memories/secret.md", content="theirs")
    note_put(user=other_user, session=None, path="/memories/profile/secret.md", content="theirs")
    assert api.get("/memory/notes").json() == {"chat": [], "profile": []}
    assert api.delete("/memory/notes?scope=chat&path=/memories/secret.md").status_code == 404
    assert api.get("/memory/notes/versions?scope=profile&path=/memories/profile/secret.md").json() == {
        "versions": [],
        "next_before": None,
    }
    version = NoteVersion.objects.filter(user=other_user).first()
    restored = api.post("/memory/notes/restore", {"version_id": version.id}, content_type="application/json")
    assert restored.status_code == 404
    assert Note.objects.filter(content="theirs").count() == 2


def test_notes_need_credentials(client):
    assert client.get("/memory/notes").status_code == 401
    assert client.put("/memory/notes", {}, content_type="application/json").status_code == 401


def versions_of(client, path: str, **query) -> dict:
    response = client.get("/memory/notes/versions", {"scope": "chat", "path": path, **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_a_note_keeps_its_newest_versions_and_a_deleted_one_stays_restorable(api, session, user):
    for number in range(NOTE_VERSIONS_KEPT + 30):
        assert put(api, scope="chat", path="/memories/a.md", content=f"text {number}").status_code == 200
    assert NoteVersion.objects.filter(path="/memories/a.md").count() == NOTE_VERSIONS_KEPT == 50
    assert api.delete("/memory/notes?scope=chat&path=/memories/a.md").status_code == 204
    kept = NoteVersion.objects.filter(path="/memories/a.md").order_by("-id")
    assert kept.count() == NOTE_VERSIONS_KEPT
    assert [(v.before, v.after) for v in kept[:2]] == [("text 79", None), ("text 78", "text 79")]
    assert kept.last().after == "text 31"  # the oldest kept; older ones were pruned
    deletion = versions_of(api, "/memories/a.md", limit=1)["versions"][0]
    restored = api.post("/memory/notes/restore", {"version_id": deletion["id"]}, content_type="application/json")
    assert restored.status_code == 200 and restored.json()["content"] == "text 79"


def test_only_the_most_recently_deleted_notes_keep_their_versions(session, user):
    """A loop of new paths made and deleted cannot grow the versions without end either."""
    for number in range(DELETED_NOTES_KEPT + 5):
        note_put(user=user, session=session, path=f"/memories/gone/{number}.md", content=f"gone {number}")
        note_delete(user=user, session=session, path=f"/memories/gone/{number}.md")
    note_put(user=user, session=session, path="/memories/live.md", content="stays")
    paths = set(NoteVersion.objects.filter(session=session).values_list("path", flat=True))
    assert len(paths) == DELETED_NOTES_KEPT + 1 == 101
    assert "/memories/gone/4.md" not in paths and "/memories/gone/5.md" in paths and "/memories/live.md" in paths


def test_versions_come_newest_first_in_bounded_pages(api, session):
    for number in range(25):
        put(api, scope="chat", path="/memories/a.md", content=f"text {number}")
    first = versions_of(api, "/memories/a.md", limit=10)
    assert [v["after"] for v in first["versions"]] == [f"text {n}" for n in range(24, 14, -1)]
    second = versions_of(api, "/memories/a.md", limit=10, before=first["next_before"])
    assert [v["after"] for v in second["versions"]] == [f"text {n}" for n in range(14, 4, -1)]
    last = versions_of(api, "/memories/a.md", limit=10, before=second["next_before"])
    assert [v["after"] for v in last["versions"]] == [f"text {n}" for n in range(4, -1, -1)]
    assert last["next_before"] is None
    assert len(versions_of(api, "/memories/a.md")["versions"]) == 20  # the default page
    for bad in ({"limit": NOTE_VERSIONS_KEPT + 1}, {"limit": 0}, {"before": 0}, {"before": "x"}):
        response = api.get("/memory/notes/versions", {"scope": "chat", "path": "/memories/a.md", **bad})
        assert response.status_code == 422, (bad, response.content)
