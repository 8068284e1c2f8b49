"""The window sent to the model (docs/window.md): a token-budgeted, repaired tail of the archive whose
start is stored and only moves forward, in steps.

- `plan.py`: the pure core (rows, rendering, repairs, where the window starts);
- `blocks.py`: shortening of over-cap blocks and the notes that stand in for blocks;
- `selectors.py`: the one query, `window_preview`, `window_next_step`;
- `services.py`: `window_build`, which stores the start when it moves.
"""

from __future__ import annotations

from conversations.window.selectors import window_limits, window_next_step, window_preview
from conversations.window.services import window_build
from conversations.window.types import RecentMessages, Window, WindowStep, window_render

__all__ = [
    "RecentMessages",
    "Window",
    "WindowStep",
    "window_build",
    "window_limits",
    "window_next_step",
    "window_preview",
    "window_render",
]
