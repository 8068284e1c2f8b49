"""The server process's side of frames written to the database (see realtime/push.py): with the
in-memory channel layer, a frame the task worker pushes (a scheduled prompt's turn) is a row that
this loop reads within RELAY_POLL_SECONDS and sends to its group in this process.

Rows are read by time, not only by id: on PostgreSQL a row with a lower id may commit after one with
a higher id, so the loop looks back RELAY_LOOKBACK and remembers what it has already sent.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from realtime.models import RelayedFrame
from realtime.push import layer_is_in_memory

logger = logging.getLogger(__name__)

RELAY_POLL_SECONDS = 0.25
RELAY_LOOKBACK = timedelta(seconds=10)
RELAY_KEEP = timedelta(minutes=1)  # realtime.push prunes older rows too, in case no server relays

_task: asyncio.Task | None = None


def relay_ensure_started() -> None:
    """Start the relay on the running loop once per process, when the layer needs it."""
    global _task
    if _task is not None and not _task.done():
        return
    if not layer_is_in_memory() or not getattr(settings, "BUDDY_FRAME_RELAY", True):
        return
    _task = asyncio.get_running_loop().create_task(_relay_forever())


@database_sync_to_async
def _rows_since(since, sent: set[int]) -> list[tuple[int, str, dict]]:
    rows = RelayedFrame.objects.filter(created_at__gte=since).order_by("id").values_list("id", "group", "message")
    return [row for row in rows if row[0] not in sent]


@database_sync_to_async
def _prune(before) -> None:
    RelayedFrame.objects.filter(created_at__lt=before).delete()


async def _relay_forever() -> None:
    started = timezone.now()  # frames written before this process served anyone are not relayed
    sent: dict[int, datetime] = {}
    polls = 0
    layer = get_channel_layer()
    while True:
        await asyncio.sleep(RELAY_POLL_SECONDS)
        try:
            now = timezone.now()
            rows = await _rows_since(max(started, now - RELAY_LOOKBACK), set(sent))
            for row_id, group, message in rows:
                await layer.group_send(group, message)
                sent[row_id] = now
            for row_id in [row_id for row_id, at in sent.items() if at < now - 2 * RELAY_LOOKBACK]:
                del sent[row_id]
            polls += 1
            if polls % 240 == 0:  # about once a minute
                await _prune(now - RELAY_KEEP)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("relaying frames from the database failed; trying again")
