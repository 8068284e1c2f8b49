"""The canvas of a session, kept on the server (README, "The canvas tools")."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class CanvasState(models.Model):
    """One row per session, changed only under a row lock (PostgreSQL) or an IMMEDIATE transaction
    (SQLite), so concurrent commands never lose an update; `version` grows by one with each change."""

    session = models.OneToOneField(
        "conversations.Session", on_delete=models.CASCADE, primary_key=True, related_name="canvas"
    )
    elements = models.JSONField(default=list)
    mode = models.CharField(max_length=16, default="content")
    theme = models.CharField(max_length=64, blank=True, default="")
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "canvas"
        verbose_name_plural = "canvases"
        constraints = [models.CheckConstraint(condition=Q(mode__in=["content", "clear"]), name="canvas_mode_valid")]

    def __str__(self) -> str:
        return f"canvas of {self.session} (v{self.version})"
