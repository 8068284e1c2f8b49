"""A user's chats as wholes: renaming, deleting and exporting one (README: HTTP API, `/chats`), and
telling the user's open tabs that their chat list changed.

Deleting a chat removes everything holding its content, batch by batch (so a chat of a million
messages never holds one giant transaction): its schedules, Idempotency-Key answers, notes and their
versions, summaries, canvas, vectors and messages — and with the messages, through the search
triggers, its full-text rows and statistics — then the relayed frames of its group and the session
with the rest. The chat's model calls stay for cost reporting with their token counts only: no
session, no prompt id, no error text. Profile notes are the user's, not the chat's: they stay, and a
link from one to a deleted message is cleared. While the deletion runs it holds the chat's turn lease,
so no turn starts in a chat half deleted; a chat whose turn is running is refused (TurnRunning). A
turn's search documents, written right after it has answered and let the lease go, may land meanwhile:
the batch of messages they refer to is deleted again. A
deletion cut short (a crash) leaves the chat listed with what was not yet deleted, and deleting it
again finishes the job.

An export never gives a chat half deleted: the whole chat is read before its first byte is sent, and
the export is refused (ChatBeingDeleted) when a deletion took the lease before that read ended
(chat_export_file).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC

from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.text import slugify

from agent.models import IdempotencyKey, ScheduledPrompt
from agent.turn import turn_lease_acquire, turn_lease_ended, turn_lease_hold
from canvas.models import CanvasState
from conversations.errors import Conflict
from conversations.history_io import history_export
from conversations.models import Message, ModelCall, Session
from conversations.refs import ChatRef
from conversations.selectors import session_require
from conversations.services import session_rename
from memory.models import MessageVector, Note, NoteProposal, NoteVersion, Summary
from memory.notes.history import note_lines_export
from realtime.models import RelayedFrame
from realtime.push import chat_deleted_on_commit, chat_group, chats_changed_on_commit, user_group

DELETE_BATCH = 1000  # rows per transaction when deleting a chat's messages, vectors and model calls
# A deletion's turn lease id: this mark, which no other holder's (hexadecimal) id starts with, then 24
# random hex digits (the field holds 32 characters).
DELETION_MARK = "deleting"


class ChatBeingDeleted(Conflict):
    def __init__(self) -> None:
        super().__init__("This chat is being deleted.")


EXPORT_FILE_TITLE_CHARS = 60
EXPORT_SPOOL_BYTES = 1024 * 1024  # an export is kept in memory up to this size, then on disk


def chat_rename(*, user: AbstractBaseUser, chat: ChatRef, title: str) -> Session:
    """Rename one of the user's chats (ChatNotFound, InvalidTitle) and tell the user's tabs."""
    session = session_require(user=user, chat=chat)
    with transaction.atomic():
        session_rename(session=session, title=title)
        chats_changed_on_commit(session, "renamed")
    return session


# A batch whose rows gained a referencing row meanwhile is deleted again this many times.
BATCH_ATTEMPTS = 3


def _in_batches(rows, *, action) -> None:
    """Apply `action(ids)` to the primary keys `rows` selects, DELETE_BATCH at a time, each batch in a
    transaction of its own (a batch read again after each, so `action` must take the rows out of `rows`).

    A batch is tried again when its commit finds a row that references a row it deleted, written
    meanwhile by another transaction: the search documents of a turn that has answered and released
    the chat's lease, written just after (agent.turn; PostgreSQL checks the reference at the commit).
    Tried again, the deletion sees and deletes them too."""
    while True:
        ids = list(rows.order_by("pk").values_list("pk", flat=True)[:DELETE_BATCH])
        if not ids:
            return
        for attempt in range(1, BATCH_ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    action(ids)
                break
            except IntegrityError:
                if attempt == BATCH_ATTEMPTS:
                    raise


def chat_delete(*, user: AbstractBaseUser, chat: ChatRef) -> None:
    """Delete one of the user's chats and everything holding its content (see the module docstring).
    Raises ChatNotFound (unknown, or another user's) and TurnRunning (a turn runs in it). Once it
    commits, the chat's sockets get `chat_deleted` and every socket of the user `chats_changed`."""
    session = session_require(user=user, chat=chat)
    lease_id = turn_lease_acquire(session=session, lease_id=DELETION_MARK + uuid.uuid4().hex[:24])
    # Renewed by a heartbeat, as a turn's, however long a batch waits for the database. Never released:
    # a finished deletion leaves no session, and one cut short leaves its mark for exports to refuse.
    turn_lease_hold(session=session, lease_id=lease_id)
    try:
        _chat_delete_held(session)
    finally:
        turn_lease_ended(lease_id)


def _chat_delete_held(session: Session) -> None:
    with transaction.atomic():
        ScheduledPrompt.objects.filter(
            user_id=session.user_id, agent_id=session.agent_id, chat_id=session.chat_id
        ).delete()
        IdempotencyKey.objects.filter(session=session).delete()
        NoteProposal.objects.filter(session=session).delete()
        NoteVersion.objects.filter(session=session).delete()
        Note.objects.filter(session=session).delete()
        Summary.objects.filter(session=session).delete()
        CanvasState.objects.filter(session=session).delete()
    _in_batches(
        MessageVector.objects.filter(session=session),
        action=lambda ids: MessageVector.objects.filter(pk__in=ids).delete(),
    )
    _in_batches(
        Message.objects.filter(session=session),
        action=lambda ids: Message.objects.filter(pk__in=ids).delete(),
    )
    _in_batches(
        ModelCall.objects.filter(session=session),
        action=lambda ids: ModelCall.objects.filter(pk__in=ids).update(session=None, prompt_message_id=None, error=""),
    )
    group = chat_group(user_id=session.user_id, agent_id=session.agent_id, chat_id=session.chat_id)
    named = Q(message__frame__agent=session.agent.slug, message__frame__chat_id=session.chat_id)
    with transaction.atomic():
        RelayedFrame.objects.filter(Q(group=group) | Q(named, group=user_group(session.user_id))).delete()
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(Session), object_id=str(session.pk)
        ).delete()
        session.delete()
        chat_deleted_on_commit(
            user_id=session.user_id, agent_id=session.agent_id, agent=session.agent.slug, chat_id=session.chat_id
        )


def chat_export_name(*, session: Session) -> str:
    """The export's file name: the chat's title (or its id) and the day of its last message (UTC), in
    ASCII letters, digits and hyphens only, e.g. `trip-to-lisbon-2026-11-25.jsonl`."""
    name = slugify(session.title)[:EXPORT_FILE_TITLE_CHARS].strip("-") or slugify(session.chat_id) or "chat"
    last = Message.objects.filter(session=session).aggregate(last=Max("created_at"))["last"]
    day = (last or session.created_at or timezone.now()).astimezone(UTC)
    return f"{name}-{day:%Y-%m-%d}.jsonl"


def chat_export_check(*, session: Session) -> None:
    """Raise ChatBeingDeleted when the chat is gone or a deletion took its lease, even one whose lease
    has expired (a deletion cut short: the chat is half deleted until it is deleted again). A deletion
    takes the lease before it deletes anything, so rows read before a check that passes were read whole."""
    state = Session.objects.filter(pk=session.pk).values_list("turn_lease_id", flat=True).first()
    if state is None or state.startswith(DELETION_MARK):
        raise ChatBeingDeleted()


def chat_export_lines(*, session: Session) -> Iterator[str]:
    """The chat as `export_history` writes it: one JSON line per message, oldest first, then one per
    chat note, each ending in a newline, read page by page as it is consumed. Checked before the first
    read and after the last (chat_export_check): a deletion that took the lease meanwhile ends the lines
    with ChatBeingDeleted instead of letting them end without the rows it deleted."""
    chat_export_check(session=session)
    for line in history_export(session=session):
        yield line + "\n"
    notes = list(note_lines_export(session=session))
    chat_export_check(session=session)
    for line in notes:
        yield line + "\n"


def chat_export_file(*, session: Session) -> tempfile.SpooledTemporaryFile:
    """The whole of chat_export_lines in a temporary file, at its start, read before a byte of it is
    sent (in memory up to EXPORT_SPOOL_BYTES, then on disk): a download is the whole chat or, when a
    deletion starts while it is read, ChatBeingDeleted — never a file that ends early."""
    spool = tempfile.SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)  # noqa: SIM115  (the caller closes it)
    try:
        for line in chat_export_lines(session=session):
            spool.write(line.encode("utf-8"))
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool
