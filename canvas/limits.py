"""The canvas's limits and enumerations, shared by the tool schemas and the service."""

from __future__ import annotations

import re

MAX_ELEMENTS = 50
# Compact JSON of one stored element, UTF-8 encoded.
MAX_ELEMENT_BYTES = 16 * 1024

# Element ids end up in DOM ids and in the `[confirmation ID: …]` answer text: keep them plain.
ELEMENT_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
ELEMENT_ID_RE = re.compile(ELEMENT_ID_PATTERN)
# Ids the server keeps for its own questions about the user's memory (README: the canvas tools): no
# canvas tool may add, change or remove such an element; only the user answers it.
RESERVED_ID_PREFIX = "memory-"
# One such question shows a note's whole text or an edit's changed lines: up to two 8 KiB notes, as JSON.
MAX_SERVER_ELEMENT_BYTES = 64 * 1024

MAX_TITLE_CHARS = 200
MAX_BUTTON_LABEL_CHARS = 40
MAX_THEME_CHARS = 64  # CanvasState.theme's max_length
MAX_NOTIFICATION_CHARS = 1000

CHART_TYPES = ("line", "bar", "pie")
MEDIA_TYPES = ("image", "audio", "video")
NOTIFICATION_LEVELS = ("info", "success", "warning", "error")
CANVAS_MODES = ("content", "clear")
