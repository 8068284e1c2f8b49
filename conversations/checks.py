"""System checks of the conversations app's settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from conversations.prices import PricesInvalid, prices_parse


@register()
def prices_check(app_configs, **kwargs) -> list[Error]:
    """BUDDY_PRICES is read at start-up: a value that cannot be read stops the server, saying why."""
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
