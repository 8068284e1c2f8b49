"""The in-memory channel layer of the embedded default (one server process, no Redis)."""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as StockInMemoryChannelLayer


class InMemoryChannelLayer(StockInMemoryChannelLayer):
    """channels' in-memory layer, sweeping expired messages and memberships at most once a second.

    The stock layer sweeps every channel and every group membership on each receive() and
    group_send(): a broadcast to N sockets makes N receives, so it costs O(N²) — with a thousand sockets
    a single canvas change would be slow to reach them all (docs/benchmarks.md). Expiry only has to happen
    eventually: it frees the messages of channels that nobody reads any more.
    """

    sweep_interval = 1.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_interval
        super()._clean_expired()
