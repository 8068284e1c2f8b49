"""System checks of the memory app's settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

SEMANTIC_MODES = ("auto", "on", "off")


@register()
def semantic_search_check(app_configs, **kwargs) -> list[Error]:
    """BUDDY_SEMANTIC_SEARCH=on needs the embedding model; a mistyped mode is an error, not "auto"."""
    from embeddings import encoder  # numpy and the encoder load only when the checks run

    mode = settings.BUDDY_SEMANTIC_SEARCH
    if mode not in SEMANTIC_MODES:
        return [
            Error(
                f"BUDDY_SEMANTIC_SEARCH is {mode!r}.",
                hint=f"Use one of: {', '.join(SEMANTIC_MODES)}.",
                id="memory.E001",
            )
        ]
    if mode == "on" and not encoder.available():
        return [
            Error(
                "BUDDY_SEMANTIC_SEARCH is on, but the embedding model cannot be loaded.",
                hint=f"make semantic-model, or: {encoder.INSTALL_HINT}",
                id="memory.E002",
            )
        ]
    return []
