"""daphne, with a WebSocket protocol that bounds what one socket can make the server hold.

Run it as daphne itself: `python -m buddy.server -b 127.0.0.1 -p 8000 buddy.asgi:application`
(`manage.py serve` does). Three things change against daphne's own protocol (README: Settings;
docs/security.md):

- Reading. daphne's autobahn fails a message over 1 MiB, and a text message that is not valid
  UTF-8, by closing the connection: the client never learns why. Here every message reaches the
  application, which answers bad ones with an `error` frame and keeps the socket open: a message is
  kept only up to one byte past the application's frame limit (the rest is read and dropped, so
  reading stays bounded too), and invalid UTF-8 arrives as surrogate escapes, which the consumer
  refuses as not valid Unicode.
- Pacing. daphne reads whatever a client sends into the application's queue, unbounded. Here a
  socket stops being read while MAX_QUEUED_MESSAGES of its messages wait for the application, and is
  read again once half of them are handled: a flood waits in the client's own TCP buffers, and the
  consumer (which answers refusals at a bounded pace, web/consumers.py) sets how fast it is read.
- Writing. Twisted buffers whatever is written to a client that does not read. Once more than the
  transport's own buffer (64 KiB) is waiting, what is sent on top is counted; past
  BUDDY_WS_SEND_BUFFER_BYTES the connection is dropped (the client reconnects and gets a replay).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import daphne.server
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from realtime.limits import MAX_FRAME_BYTES

logger = logging.getLogger(__name__)

MAX_QUEUED_MESSAGES = 64


def _settings() -> Any:
    # Read when a socket needs them: daphne imports the application, and so sets Django up, after
    # this module is loaded.
    from django.conf import settings

    return settings


def _reactor() -> Any:
    # The reactor daphne installs (asyncio's) when daphne.server is imported: imported after it.
    from twisted.internet import reactor

    return reactor


@implementer(IPushProducer)
class _WriteBacklog:
    """Told by the transport when its write buffer fills (pause) and drains (resume)."""

    def __init__(self, protocol: BoundedWebSocketProtocol) -> None:
        self.protocol = protocol

    def pauseProducing(self) -> None:  # noqa: N802 (Twisted's interface)
        self.protocol.write_backlogged = True
        self.protocol.transport.pauseProducing()  # nor read more requests from a client that does not read

    def resumeProducing(self) -> None:  # noqa: N802
        self.protocol.write_backlogged = False
        self.protocol.bytes_over_buffer = 0
        self.protocol.reading_resume()

    def stopProducing(self) -> None:  # noqa: N802
        pass


class BoundedWebSocketProtocol(WebSocketProtocol):
    write_backlogged = False
    bytes_over_buffer = 0
    dropped = False
    message_bytes = 0
    queue_full = False

    def reading_resume(self) -> None:
        """Read the client again, unless its writes or the application's queue still hold it back."""
        if not self.write_backlogged and not self.queue_full:
            self.transport.resumeProducing()

    def _queue_check(self) -> None:
        if self.application_queue.qsize() > MAX_QUEUED_MESSAGES // 2:
            _reactor().callLater(0.01, self._queue_check)
            return
        self.queue_full = False
        self.reading_resume()

    def onOpen(self) -> None:  # noqa: N802
        super().onOpen()
        # The HTTP channel the socket was upgraded from is still the transport's producer.
        self.transport.unregisterProducer()
        self.transport.registerProducer(_WriteBacklog(self), True)

    # --- reading --------------------------------------------------------------------------------

    def onMessageBegin(self, isBinary: bool) -> None:  # noqa: N802, N803
        super().onMessageBegin(isBinary)
        self.message_bytes = 0

    def onMessageFrameData(self, payload: bytes) -> None:  # noqa: N802
        room = MAX_FRAME_BYTES + 1 - self.message_bytes
        self.message_bytes += len(payload)
        if room > 0:
            super().onMessageFrameData(payload[:room])

    def onMessage(self, payload: bytes, isBinary: bool) -> None:  # noqa: N802, N803
        if isBinary or self.muted:
            super().onMessage(payload, isBinary)
            return
        self.last_ping = time.time()
        text = payload.decode("utf-8", "surrogateescape")
        self.application_queue.put_nowait({"type": "websocket.receive", "text": text})
        if not self.queue_full and self.application_queue.qsize() >= MAX_QUEUED_MESSAGES:
            self.queue_full = True
            self.transport.pauseProducing()
            _reactor().callLater(0.01, self._queue_check)

    # --- writing --------------------------------------------------------------------------------

    def serverSend(self, content: str | bytes, binary: bool = False) -> None:  # noqa: N802
        if self.write_backlogged:
            self.bytes_over_buffer += len(content.encode("utf-8") if isinstance(content, str) else content)
            limit = _settings().BUDDY_WS_SEND_BUFFER_BYTES
            if self.bytes_over_buffer > limit:
                if not self.dropped:
                    logger.warning(
                        "dropped WebSocket %s: its client read nothing while more than %d bytes waited for it",
                        self.client_addr,
                        limit,
                    )
                    # Not `muted`: the application must still get its websocket.disconnect.
                    self.dropped = True
                    self.dropConnection(abort=True)
                return
        super().serverSend(content, binary)


class BoundedWebSocketFactory(WebSocketFactory):
    protocol = BoundedWebSocketProtocol

    def setProtocolOptions(self, **options: Any) -> None:  # noqa: N802
        # Sizes and UTF-8 are the protocol's business (above), not reasons to close the connection.
        options.update(maxMessagePayloadSize=0, maxFramePayloadSize=0, utf8validateIncoming=False)
        super().setProtocolOptions(**options)


# Allocations between two young collections (Python's default: 700). A turn allocates tens of thousands
# of objects, nearly all freed by their reference counts: collecting every 700 scans the same live
# requests over and over.
YOUNG_COLLECTION_EVERY = 10_000


def heap_freeze() -> None:
    """Once the application is loaded (and with it the model's SDK), move every object alive to the
    collector's permanent generation: a full collection then scans only what the requests made since,
    instead of stopping every thread to walk the whole heap of Django, the SDK and their modules. Young
    collections come every YOUNG_COLLECTION_EVERY allocations."""
    # Here, once the reactor runs: daphne has loaded the application by then, and with it Django's apps.
    from agent.llm import model_client

    model_client()  # imports the SDK, which a process otherwise loads on its first turn
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 10, 10)


def main() -> None:
    from daphne.cli import CommandLineInterface

    daphne.server.WebSocketFactory = BoundedWebSocketFactory
    _reactor().callWhenRunning(heap_freeze)
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
