"""The one table of the real-time app."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RelayedFrame(models.Model):
    """A group message written by a process without sockets of its own (the task worker) when the
    channel layer is the in-memory one, which cannot cross processes: the server process that holds
    the sockets reads these rows and sends each to its group (realtime/relay.py). Kept a minute."""

    group = models.CharField(max_length=100)
    message = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.group} #{self.pk}"
