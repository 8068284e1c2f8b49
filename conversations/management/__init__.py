"""Helpers of the conversations app's management commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


def user_named(username: str) -> AbstractBaseUser:
    """The user with that username, or a CommandError that says there is none."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"No user named {username!r}.")
    return user
