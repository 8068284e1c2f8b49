"""System checks of the conversations app's settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from conversations.prices import PricesInvalid, prices_parse


@register()
def prices_check(app_configs, **kwargs) -> list[Error]:
    """BUDDY_PRICES is read at start-up: a value that cannot be read stops `manage.py check` and the
    commands that run the checks, and the server (settings_refused), saying why."""
    try:
        prices_parse(settings.BUDDY_PRICES)
    except PricesInvalid as exc:
        return [
            Error(
                f"BUDDY_PRICES cannot be read: {exc}.",
                hint="Per model, the prices of a million tokens: input, output, cache read, cache write "
                "(5-minute; a 5th number prices 1-hour writes), e.g. "
                "claude-sonnet-5-5=3,15,0.3,3.75;claude-haiku-5-5=1,5,0.1,1.25",
                id="conversations.E001",
            )
        ]
    return []


def settings_refused() -> None:
    """Raise ImproperlyConfigured with what the settings checks a server must pass report, if anything:
    buddy.asgi calls it as a server process starts (daphne runs no system checks)."""
    errors = prices_check(None)
    if errors:
        raise ImproperlyConfigured("; ".join(f"{error.id}: {error.msg} {error.hint}" for error in errors))
