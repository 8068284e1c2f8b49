"""A person's page preferences (web.models.Preferences): read with the defaults, written whole."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from conversations.errors import InvalidInput
from web.models import Preferences, Theme


class InvalidTheme(InvalidInput):
    def __init__(self, theme: object) -> None:
        choices = ", ".join(f"`{value}`" for value in Theme.values)
        super().__init__(f"theme must be one of {choices}, not {theme!r}", field="theme")


def preferences_get(*, user: AbstractBaseUser) -> Preferences:
    """The user's preferences; the defaults (unsaved) when they never chose."""
    return Preferences.objects.filter(user=user).first() or Preferences(user=user)


@transaction.atomic
def preferences_set(*, user: AbstractBaseUser, theme: str) -> Preferences:
    """Keeps the user's choice; InvalidTheme for a theme the page does not know."""
    if theme not in Theme.values:
        raise InvalidTheme(theme)
    preferences, _ = Preferences.objects.update_or_create(user=user, defaults={"theme": theme})
    return preferences
