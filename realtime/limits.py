"""The WebSocket's limits. Plain Python: buddy/server.py reads them before Django is set up."""

from __future__ import annotations

# Largest text frame a client may send over the WebSocket, UTF-8 encoded (README: WebSocket).
MAX_FRAME_BYTES = 64 * 1024
