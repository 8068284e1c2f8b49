from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import Note, NoteVersion
from memory.notes.services import note_put

pytestmark = pytest.mark.django_db


def test_staff_read_notes_and_versions_but_cannot_change_them(client, staff_user, session, user):
    note_put(user=user, session=session, path="/memories/a.md", content="<b>tea</b>")
    note_put(user=user, session=session, path="/memories/a.md", content="coffee")
    client.force_login(staff_user)
    note = Note.objects.get()
    page = client.get(reverse("admin:memory_note_change", args=[note.pk])).content.decode()
    assert "coffee" in page and 'name="content"' not in page and "Save" not in page
    versions = client.get(reverse("admin:memory_noteversion_changelist")).content.decode()
    assert versions.count("/memories/a.md") >= 2
    version = NoteVersion.objects.order_by("id").first()
    detail = client.get(reverse("admin:memory_noteversion_change", args=[version.pk])).content.decode()
    assert "&lt;b&gt;tea&lt;/b&gt;" in detail
    assert client.get(reverse("admin:memory_note_add")).status_code == 403
    assert client.post(reverse("admin:memory_note_delete", args=[note.pk]), {"post": "yes"}).status_code == 403
    assert Note.objects.filter(content="coffee").exists()
