"""The agent's tables: scheduled prompts and their runs, rate counters, and the first answer of each
`POST /prompt` with an `Idempotency-Key`."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from conversations.models import Agent, Message, Session, chat_id_validator


class IdempotencyKey(models.Model):
    """The first answer to a `POST /prompt` with an `Idempotency-Key`, replayed for every repeat."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, null=True, related_name="+")
    # The archived prompt, once there is one: a retry after a crash resumes that turn, never re-archives.
    prompt = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, related_name="+")
    # The first answer: the reply (agent.submit.PromptReply's fields), or {"detail": ...} when the model failed.
    response = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_unique_user_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.user_id})"


class ScheduledPrompt(models.Model):
    """A prompt the server runs as its user at a time, or every N seconds (README, "Commands")."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scheduled_prompts")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    chat_id = models.CharField(max_length=64, validators=[chat_id_validator], default="main")
    text = models.TextField()
    # The next due time; None once a one-off schedule has run. Claimed with a conditional UPDATE, so
    # each due time runs once across every process.
    next_run_at = models.DateTimeField(null=True, blank=True, db_index=True)
    every_seconds = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: run once.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(every_seconds__isnull=True) | Q(every_seconds__gte=60), name="schedule_every_minute_or_more"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.text[:40]} ({self.user})"


class ScheduledRun(models.Model):
    """One due time of a schedule: its unique row is what makes a due time run exactly once."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    schedule = models.ForeignKey(ScheduledPrompt, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    prompt = models.ForeignKey(Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The worker running it holds this lease (conversations.leases), renewed by a heartbeat: a run whose
    # worker died is handed to the task queue again once its lease has expired (agent.tasks).
    lease_id = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True, default=timezone.now)  # last handed to the queue

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "due_at"], name="scheduled_run_once_per_due_time")]
        indexes = [models.Index(fields=["status"], name="scheduled_run_status")]

    def __str__(self) -> str:
        return f"{self.schedule_id} @ {self.due_at:%Y-%m-%d %H:%M}"


class RateCounter(models.Model):
    """How often one limited thing (a user's prompts, failed logins of a name or an address) happened in
    one fixed window of time. Kept in the database so every server process counts together."""

    key = models.CharField(max_length=200)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window_start"], name="rate_counter_unique_window")]
        indexes = [models.Index(fields=["window_start"], name="rate_counter_window_start")]

    def __str__(self) -> str:
        return f"{self.key} @ {self.window_start:%Y-%m-%d %H:%M}: {self.count}"
