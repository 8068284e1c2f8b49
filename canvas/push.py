"""Frames to every socket of a session, in every server process, through the channel layer.

The database stays the source of truth: a layer may drop a message (channels-redis does past its
capacity), and a client that sees a gap in the canvas `version` asks for a replay.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def session_group(session_id: int) -> str:
    return f"session.{session_id}"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def push_frame(session_id: int, frame: dict[str, Any]) -> None:
    """Send one frame now. A failing layer is logged, never raised: pushing is best effort."""
    try:
        async_to_sync(get_channel_layer().group_send)(session_group(session_id), {"type": "frame", "frame": frame})
    except Exception:
        logger.exception("push to session %s failed", session_id)


async def apush_frame(session_id: int, frame: dict[str, Any]) -> None:
    try:
        await get_channel_layer().group_send(session_group(session_id), {"type": "frame", "frame": frame})
    except Exception:
        logger.exception("push to session %s failed", session_id)


def push_frame_on_commit(session_id: int, frame: dict[str, Any]) -> None:
    """Send after the surrounding transaction commits, so no socket sees a change that was rolled back."""
    transaction.on_commit(lambda: push_frame(session_id, frame))
