"""Agents, sessions and the message archive: the ground every other app stands on."""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from conversations.content import TITLE_MAX_CHARS
from conversations.refs import CHAT_ID_RE, CHAT_ID_RULE

chat_id_validator = RegexValidator(CHAT_ID_RE, f"A chat id is {CHAT_ID_RULE}")


class Agent(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=100)
    avatar = models.CharField(max_length=16, default="🤖", help_text="A short string: an emoji or initials.")
    personality = models.TextField(blank=True, help_text="Opens the system prompt of every call.")
    model = models.CharField(max_length=100, blank=True, help_text="Empty: BUDDY_MODEL.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Session(models.Model):
    """One conversation: a user's chat with an agent, named by the client's `chat_id`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="buddy_sessions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sessions")
    chat_id = models.CharField(max_length=64, validators=[chat_id_validator])
    # What the chat picker shows: the start of the first prompt, until the user renames the chat.
    title = models.CharField(max_length=TITLE_MAX_CHARS, blank=True, default="")
    # The id of the window's first message. It only moves forward (docs/window.md) and is stored so
    # that every process and every restart sends the same prefix; 0 means "from the beginning".
    window_start_id = models.BigIntegerField(default=0)
    # The turn lease: one turn at a time per session, without holding a transaction across a model
    # call. A process that dies leaves a lease that expires; renewing it proves the holder is alive.
    turn_lease_id = models.CharField(max_length=32, blank=True, default="")
    turn_lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Set by `cancel` from any process; the turn holding the lease polls it and stops.
    turn_cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "agent", "chat_id"], name="session_unique_user_agent_chat"),
            models.CheckConstraint(condition=~Q(chat_id=""), name="session_chat_id_not_empty"),
            models.CheckConstraint(condition=Q(window_start_id__gte=0), name="session_window_start_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.agent_id and self.agent.slug} · {self.chat_id}"


class Message(models.Model):
    """One archived message, exactly as exchanged with the model. Never rewritten, never deleted."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    # No index of its own: (session, id) below serves every lookup by session, and a second index
    # would only tempt PostgreSQL's planner into sorting a small session's rows (docs/bench-window.md).
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.JSONField(help_text="Anthropic content blocks.")
    # Computed once on write (docs/window.md), so the window walk never re-serialises content.
    tokens = models.PositiveIntegerField()
    is_turn_start = models.BooleanField()
    # The estimate of the largest single block: only messages with a block over the cap
    # (BUDDY_MAX_PROMPT_TOKENS) need shortening in the window, so only those are ever re-read.
    largest_block_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [
            # "The newest N messages of a session" and "messages after the window start" are one
            # range scan of this index.
            models.Index(fields=["session", "id"], name="message_session_id"),
            models.Index(fields=["session", "created_at"], name="message_session_created"),
            models.Index(fields=["session", "id"], name="message_session_turn_start", condition=Q(is_turn_start=True)),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=["user", "assistant"]), name="message_role_valid"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.role}"


# What a call's input costs, in base input tokens: the provider's price of each kind of input token
# relative to an uncached one (a cache write by lifetime, a cache read whatever the lifetime), by the
# name of ModelCall's field that counts it.
INPUT_PRICE = {
    "input_tokens": 1.0,
    "cache_creation_5m_input_tokens": 1.25,
    "cache_creation_1h_input_tokens": 2.0,
    "cache_read_input_tokens": 0.1,
}


def input_cost(usage: Mapping[str, int | None]) -> float:
    """The input of one call (or a sum of calls) priced in base input tokens."""
    return sum(price * (usage.get(name) or 0) for name, price in INPUT_PRICE.items())


class ModelCall(models.Model):
    """Every call to the model provider, with its usage: the audit trail for staff and stats."""

    class Kind(models.TextChoices):
        CHAT = "chat"
        SUMMARY = "summary"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="model_calls")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CHAT)
    model = models.CharField(max_length=100)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_input_tokens = models.PositiveIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveIntegerField(default=0)
    # The cache writes above by lifetime (they add up to it): a 1-hour write costs 2× the base input
    # price, a 5-minute one 1.25× (INPUT_PRICE; agent.cache chooses the lifetimes, BUDDY_CACHE_TTL).
    cache_creation_5m_input_tokens = models.PositiveIntegerField(default=0)
    cache_creation_1h_input_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    # The prompt (the turn's first message) of the turn a chat call served, for staff to open that turn;
    # null for a summary call. A plain id, not a foreign key: a chat's deletion keeps its calls' token
    # counts and never has to visit this table for each message it deletes.
    prompt_message_id = models.BigIntegerField(null=True, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["session", "created_at"], name="modelcall_session_created")]

    def __str__(self) -> str:
        return f"{self.kind} {self.model} ({self.input_tokens}→{self.output_tokens})"


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class HistoryImport(models.Model):
    """One `import_history` into a session: its digest refuses importing the same history twice."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64, help_text="SHA-256 of the imported messages as parsed.")
    messages = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "digest"], name="history_import_once")]

    def __str__(self) -> str:
        return f"{self.messages} messages into {self.session_id} ({self.digest[:12]})"
