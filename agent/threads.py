"""The threads turns run on, apart from the event loop's default executor (docs/architecture.md,
"Threads").

A turn waits on the model for seconds. The loop's default executor is a handful of threads on a small
machine, shared with every socket's replays and database calls: a few slow model calls there would
stall every other socket. An HTTP request's own thread (buddy/handlers.py) is one per request, with no
bound. HTTP and WebSocket turns run on this one bounded pool instead; when all BUDDY_TURN_THREADS are
busy, a turn waits for one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from realtime.push import group_sends_handed_off

T = TypeVar("T")


@functools.cache
def turn_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.BUDDY_TURN_THREADS, thread_name_prefix="buddy-turn")


def _closing(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()  # a broken or expired connection is not left to the thread's next turn


async def on_turn_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Await `function(*args, **kwargs)` run on a turn thread. Its frames are handed to this loop
    without the thread waiting for it (realtime.push.group_sends_handed_off)."""
    group_sends_handed_off()
    run = sync_to_async(_closing, thread_sensitive=False, executor=turn_executor())
    return await run(function, *args, **kwargs)


def on_turn_thread_wait(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` run on a turn thread, waited for from a sync view on its request's
    thread (buddy/handlers.py): no trip through the event loop. Its frames are handed to the loop as
    on_turn_thread's are (buddy/asgi.py sets that up for every HTTP request)."""
    return turn_executor().submit(_closing, function, *args, **kwargs).result()
