"""The threads turns run on, apart from the event loop's default executor (docs/architecture.md,
"Threads").

A turn waits on the model for seconds. The loop's default executor is a handful of threads on a small
machine, shared with every socket's replays and database calls: a few slow model calls there would
stall every other socket. An HTTP request's thread (buddy/handlers.py) only waits for its turn. HTTP and
WebSocket turns run on this one bounded pool instead; when all BUDDY_TURN_THREADS are busy, a turn
waits for one.

Of those threads, at most BUDDY_TURN_SLOTS work at once; the rest wait on the model or for a slot. A
turn's work between model calls is Python under the one interpreter lock: with dozens of turn threads
all runnable, every other thread (the event loop answering `/healthz`, a socket's replay) waits for
the lock behind each of them in turn. A few slots keep the work queued here instead, where it waits
without contending, and the throughput stays that of the one core the interpreter can use.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from realtime.push import group_sends_handed_off

T = TypeVar("T")

logger = logging.getLogger(__name__)

_held = threading.local()


@functools.cache
def turn_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.BUDDY_TURN_THREADS, thread_name_prefix="buddy-turn")


@functools.cache
def _turn_slots() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(settings.BUDDY_TURN_SLOTS)


@contextmanager
def turn_slot() -> Iterator[None]:
    """Hold one of the BUDDY_TURN_SLOTS while the block runs (waiting for one first)."""
    slots = _turn_slots()
    slots.acquire()
    _held.slot = True
    try:
        yield
    finally:
        if getattr(_held, "slot", False):
            _held.slot = False
            slots.release()


@contextmanager
def turn_slot_lent() -> Iterator[None]:
    """Give this thread's slot to another turn while the block waits (on the model), and take one again
    after. Nothing is lent inside a transaction: a thread must never wait for a slot while it holds
    database locks that a thread with a slot may be waiting for. A no-op on a thread without a slot
    (a scheduled run in the task worker)."""
    if not getattr(_held, "slot", False) or connection.in_atomic_block:
        yield
        return
    slots = _turn_slots()
    _held.slot = False
    slots.release()
    try:
        yield
    finally:
        slots.acquire()
        _held.slot = True


def _closing(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    try:
        with turn_slot():
            return function(*args, **kwargs)
    finally:
        close_old_connections()  # a broken or expired connection is not left to the thread's next turn


async def on_turn_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Await `function(*args, **kwargs)` run on a turn thread, holding a turn slot except while it waits
    on the model (`turn_slot_lent`). Its frames are handed to this loop without the thread waiting for
    it (realtime.push.group_sends_handed_off)."""
    group_sends_handed_off()
    run = sync_to_async(_closing, thread_sensitive=False, executor=turn_executor())
    return await run(function, *args, **kwargs)


def on_turn_thread_wait(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` run on a turn thread, waited for from a sync view on its request's
    thread (buddy/handlers.py): no trip through the event loop. Its frames are handed to the loop as
    on_turn_thread's are (buddy/asgi.py sets that up for every HTTP request). The view has its answer
    as soon as `function` returns: what `function` left for after its answer (`after_answer`) runs on
    the turn thread meanwhile."""
    answer: Future[T] = Future()
    run = turn_executor().submit(_closing, _answering, answer, function, *args, **kwargs)
    run.add_done_callback(lambda run: _answer_failure(answer, run))
    return answer.result()


def _answer_failure(answer: Future, run: Future) -> None:
    """What failed on the turn thread before `function` could answer (taking a slot) answers the view."""
    if answer.done():
        return
    if run.cancelled():  # the pool shut down before the turn started
        answer.set_exception(CancelledError())
    elif run.exception() is not None:
        answer.set_exception(run.exception())


def after_answer(job: Callable[[], None]) -> None:
    """Run `job` once whoever waits for this thread's work has its answer: a turn's follow-up work
    (its search documents, its memory jobs) that the answer need not wait for. On a turn thread an HTTP
    request waits for (on_turn_thread_wait), after the answer, on the same thread and turn slot; anywhere
    else, now. A failing job is logged."""
    jobs = getattr(_held, "after_answer", None)
    if jobs is None:
        _run(job)
    else:
        jobs.append(job)


def _answering(answer: Future[T], function: Callable[..., T], /, *args: Any, **kwargs: Any) -> None:
    _held.after_answer = []
    try:
        try:
            answer.set_result(function(*args, **kwargs))
        except BaseException as error:
            answer.set_exception(error)
        for job in _held.after_answer:
            _run(job)
    finally:
        _held.after_answer = None


def _run(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:
        logger.exception("a turn's follow-up work failed")
