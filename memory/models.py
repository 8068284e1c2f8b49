"""Rolling summaries of what slid out of the window."""

from __future__ import annotations

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
    it, as float16. Written by a background job after each turn."""

    message = models.OneToOneField(
        "conversations.Message", on_delete=models.CASCADE, primary_key=True, related_name="vector"
    )
    session = models.ForeignKey("conversations.Session", on_delete=models.CASCADE, related_name="+", db_index=False)
    vector = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["session", "message"], name="messagevector_session_message")]

    def __str__(self) -> str:
        return f"vector of message #{self.message_id}"


class VectorLease(models.Model):
    """One vector job per session at a time (memory.semantic.vectors_update): held until
    `expires_at`, so a worker killed mid-job blocks the next one for at most that long."""

    session = models.OneToOneField(
        "conversations.Session", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"vector job of session #{self.session_id} until {self.expires_at:%H:%M:%S}"


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
