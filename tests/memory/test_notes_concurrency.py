"""The cap of 100 notes per scope holds when many writers create notes at the same moment (on
PostgreSQL each writer counts in its own transaction: the count must be taken under a lock)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from conversations.models import Session
from memory.models import Note
from memory.notes.paths import NOTES_PER_SCOPE, NoteError
from memory.notes.services import note_put

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 12


def create_at_once(paths: list[str], session: Session | None, user) -> list[BaseException]:
    barrier = threading.Barrier(len(paths))
    errors: list[BaseException] = []

    def create(path: str) -> None:
        try:
            own = Session.objects.get(pk=session.pk) if session is not None else None
            barrier.wait(timeout=30)
            note_put(user=user, session=own, path=path, content="x")
        except BaseException as error:  # noqa: BLE001  (reported by the test)
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(path,)) for path in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


@pytest.mark.parametrize("scope", ["chat", "profile"])
def test_concurrent_creates_never_pass_the_cap(session, user, scope):
    owner, directory = (session, "/memories/") if scope == "chat" else (None, "/memories/profile/")
    free = 3
    for number in range(NOTES_PER_SCOPE - free):
        note_put(user=user, session=owner, path=f"{directory}old-{number}.md", content="x")
    for attempt in range(3):  # a race lost once could be luck: race several times
        errors = create_at_once([f"{directory}new-{attempt}-{n}.md" for n in range(WRITERS)], owner, user)
        assert all(isinstance(error, NoteError) and "already 100" in str(error) for error in errors), errors
        assert Note.objects.filter(user=user, scope=scope).count() == NOTES_PER_SCOPE
        assert len(errors) == (WRITERS - free if attempt == 0 else WRITERS)
