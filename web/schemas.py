from __future__ import annotations

from typing import Literal

from ninja import Field, Schema

ThemeName = Literal["system", "light", "dark"]  # web.models.Theme (tests/web/test_preferences.py holds them together)


class PreferencesIn(Schema):
    theme: ThemeName = Field(
        description="`system`: light or dark as the person's system says; `light` or `dark`: always that. "
        "A canvas theme the model sets in a chat (canvas_set_theme) shows over it while that chat is open."
    )


class PreferencesOut(Schema):
    theme: ThemeName
