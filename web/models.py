from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Theme(models.TextChoices):
    """How the page looks for a person: as their system says, or always light or dark."""

    SYSTEM = "system"
    LIGHT = "light"
    DARK = "dark"


class Preferences(models.Model):
    """A person's choices about how the page looks, kept on the server so every browser they use
    shows the same (README: The page). A user without a row has the defaults."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="preferences"
    )
    theme = models.CharField(max_length=16, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "preferences"
        constraints = [models.CheckConstraint(condition=Q(theme__in=Theme.values), name="preferences_theme_valid")]

    def __str__(self) -> str:
        return f"{self.user} · {self.theme}"
