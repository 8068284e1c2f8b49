"""What the memory app keeps: summaries, search vectors and memory notes (docs/memory.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Summary(models.Model):
    """The summary of everything in a session up to and including `through_message`.
    The latest one (highest `through_message`) is the one in the prompt."""

    session = models.ForeignKey("conversations.Session", on_delete=models.CASCADE, related_name="summaries")
    text = models.TextField()
    through_message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="+")
    tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "summaries"
        indexes = [models.Index(fields=["session", "through_message"], name="summary_session_through")]
        constraints = [
            models.UniqueConstraint(fields=["session", "through_message"], name="summary_unique_session_through")
        ]

    def __str__(self) -> str:
        return f"summary of {self.session} through #{self.through_message_id}"


class MessageVector(models.Model):
    """A message's sentence embedding for semantic search (memory.semantic): the model's unit vector of
    the message's text (without a speaker label) plus CONTEXT_WEIGHT times that of the message before
    it, in 8 bits with a scale (embeddings.vectors.PACKED). Written by a background job after each turn."""

    message = models.OneToOneField(
        "conversations.Message", on_delete=models.CASCADE, primary_key=True, related_name="vector"
    )
    session = models.ForeignKey("conversations.Session", on_delete=models.CASCADE, related_name="+", db_index=False)
    vector = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["session", "message"], name="messagevector_session_message")]

    def __str__(self) -> str:
        return f"vector of message #{self.message_id}"


class SearchDocument(models.Model):
    """What history search reads of one archived message (memory.search, docs/search.md): the text a
    person reads in it, its index terms (textsearch.text: stop words dropped, stemmed) and those of
    the messages before it as lower-weight context (an answer often only makes sense with the question
    it replies to). Written with the message (memory.search.documents); the index of each database is
    built from these rows by triggers."""

    message = models.OneToOneField(
        "conversations.Message", on_delete=models.CASCADE, primary_key=True, related_name="search_document"
    )
    session = models.ForeignKey("conversations.Session", on_delete=models.CASCADE, related_name="+", db_index=False)
    text = models.TextField(blank=True, default="")
    terms = models.TextField(blank=True, default="", editable=False)
    context = models.TextField(blank=True, default="", editable=False)
    # The message's token estimate, summed per chat by the index's statistics (GET /memory/stats): kept
    # here so that the triggers read nothing but the document (SQLite refuses a trigger that names a
    # table its schema editor is rebuilding).
    tokens = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        indexes = [models.Index(fields=["session", "message"], name="searchdocument_session_message")]

    def __str__(self) -> str:
        return f"search document of message #{self.message_id}"


class SessionJobLease(models.Model):
    """One job of a kind per session at a time: a row held until `expires_at`, so a worker killed
    mid-job blocks the next one for at most that long (conversations.leases.lease_row_take)."""

    job = "job"
    session = models.OneToOneField(
        "conversations.Session", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    expires_at = models.DateTimeField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.job} of session #{self.session_id} until {self.expires_at:%H:%M:%S}"


class VectorLease(SessionJobLease):
    """The vector job's lease (memory.semantic.vectors_update)."""

    job = "vector job"


class SummaryLease(SessionJobLease):
    """The summary job's lease (memory.summaries.summary_update)."""

    job = "summary job"


class VectorIndex(models.Model):
    """How many of a session's messages have a vector (memory.semantic.index_count): read by every
    search (semantic search joins only once a chat is indexed) and by `/memory/stats`, at the same cost
    at any size."""

    session = models.OneToOneField(
        "conversations.Session", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    indexed = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.indexed} vectors of session #{self.session_id}"


class NoteScope(models.TextChoices):
    CHAT = "chat", "chat"  # one session's
    PROFILE = "profile", "profile"  # the user's, in every chat and agent


class NoteAuthor(models.TextChoices):
    MODEL = "model", "model"
    USER = "user", "user"


class Note(models.Model):
    """A memory note (docs/memory.md): a short text at a path under /memories/. A chat note belongs to
    one session; a profile note (under /memories/profile/) to the user, with no session."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    scope = models.CharField(max_length=8, choices=NoteScope.choices)
    path = models.CharField(max_length=200)
    content = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.CharField(max_length=8, choices=NoteAuthor.choices)
    source_message = models.ForeignKey(
        "conversations.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "path"], condition=models.Q(scope="chat"), name="note_unique_chat_path"
            ),
            models.UniqueConstraint(
                fields=["user", "path"], condition=models.Q(scope="profile"), name="note_unique_profile_path"
            ),
            models.CheckConstraint(
                condition=models.Q(scope="chat", session__isnull=False)
                | models.Q(scope="profile", session__isnull=True),
                name="note_scope_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} note {self.path}"


class NoteVersion(models.Model):
    """One change of a note (also kept after the note is deleted): `before` is None for a creation,
    `after` None for a deletion. `source_message` is the assistant message whose tool call made a
    model's change. The newest NOTE_VERSIONS_KEPT of a note stay (memory.notes.services)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    scope = models.CharField(max_length=8, choices=NoteScope.choices)
    path = models.CharField(max_length=200)
    # None is no note at all (before a creation, after a deletion), unlike an empty note.
    before = models.TextField(null=True, blank=True)  # noqa: DJ001
    after = models.TextField(null=True, blank=True)  # noqa: DJ001
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.CharField(max_length=8, choices=NoteAuthor.choices)
    source_message = models.ForeignKey(
        "conversations.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        indexes = [models.Index(fields=["user", "scope", "path"], name="noteversion_user_scope_path")]

    def __str__(self) -> str:
        return f"{self.scope} note {self.path} by {self.changed_by} at {self.changed_at:%Y-%m-%d %H:%M}"


class NoteProposal(models.Model):
    """A model's change to a profile note, waiting for the user's answer to the canvas confirmation
    `element_id`: applied only when confirmed, and then exactly as stored. `changes` is what the
    confirmation showed: `[{"path", "expected", "result"}]`, each note's text as the change found it
    (null: no note there) and as it leaves it (null: deleted)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPLIED = "applied"
        DECLINED = "declined"
        FAILED = "failed"  # confirmed, but a note no longer held what was shown (or a cap was reached)

    session = models.ForeignKey("conversations.Session", on_delete=models.CASCADE, related_name="+")
    element_id = models.CharField(max_length=64)
    changes = models.JSONField(default=list)
    source_message = models.ForeignKey(
        "conversations.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    outcome = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "element_id"], name="noteproposal_unique_element")]

    def __str__(self) -> str:
        return f"proposal {self.element_id} ({self.status})"
