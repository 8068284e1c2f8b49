"""Semantic search: sentence embeddings that find what the words of a question miss (docs/search.md).

History search ranks by words (memory.search). A question often shares no word with its answer: "Who is
my new boss?" → "Priya Raman, from the Berlin office." (the reply to "So who do you report to now?").
A sentence-embedding model (all-MiniLM-L6-v2 on onnxruntime, embeddings.encoder) places such
paraphrases near each other.

- Each message gets one vector (MessageVector): the model's unit vector of its text without its
  speaker label, plus CONTEXT_WEIGHT times that of the message before it, so that a reply is found by
  the topic of the message it answers; stored as the window scan uses it, 8-bit codes and a scale.
  Written by a background job after each turn and each import (`vectors_schedule`; one per session at
  a time, a VectorLease), in id order over the whole archive; VectorIndex counts them, and
  `manage.py embed_history` writes them in its own process.
- A search in an indexed chat (`ready`) scans the similarities of the question to the session's newest
  WINDOW vectors (a bounded scan, the same cost at any archive size): the NEIGHBOURS nearest, if at
  least MIN_SIMILARITY close, join the candidates, and every candidate's similarity becomes a z-score
  over the window (`similarities`). A chat still being indexed is not scanned: the search re-ranks its
  best word candidates with `candidate_similarities` instead (memory.search).
- The question is encoded with 8-bit weights (encoder.encode_query) and the window, cached per process
  as its stored 8-bit codes, scanned by an integer product (embeddings.quantized), both on a
  thread while the words are looked up (`nearest`).

BUDDY_SEMANTIC_SEARCH: "auto" (default) is on when the model is installed, "on" requires it, "off".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import takewhile

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from conversations.bursts import Bursts
from conversations.leases import lease_row_take
from conversations.models import Message
from conversations.window.selectors import session_messages_since
from embeddings import encoder, quantized
from embeddings.vectors import pack, pack_rows, packed, unpack
from lib.threads import ProcessThreads
from memory.models import MessageVector, VectorIndex, VectorLease
from memory.selectors import MESSAGE_TEXT
from memory.semantic.postgres import binary_rows
from textsearch.speakers import without_label

logger = logging.getLogger(__name__)

CONTEXT_WEIGHT = 0.3
SEMANTIC_WEIGHT = 1.5
WINDOW = 20_000
# Vectors of windows kept per process, all sessions together (8-bit: ~400 bytes each, so ~80 MB).
CACHED_VECTORS = 200_000
# How often a cached window is checked whole against the database (seconds).
CHECK_SECONDS = 5.0
NEIGHBOURS = 50
# How long a search waits for its semantic side before it ranks by words only.
RESULT_SECONDS = 10.0
# A message found by its vector alone joins the candidates only this similar to the question (on the
# scale of own + CONTEXT_WEIGHT × previous): below it, what is nearest in a chat is not near, and a
# question about something never said finds nothing (unrelated questions against small talk: 0.02–0.25).
# On bench/recall.py (tuning and held-out seeds) a floor of up to 0.4 changes no result; 0.5 costs
# 0.004–0.01 of recall.
MIN_SIMILARITY = 0.3
# Messages of a chat that may still wait for their vectors while its searches use them: the newest few
# (a turn's own messages, whose job runs after the turn). A chat with more waiting is searched by words.
UNINDEXED_ALLOWANCE = 32
BATCH = 64
# One vector job works this long at most, then queues the next (the task engine times out at 240 s).
JOB_SECONDS = 60
# A vector job's lease: longer than a job works, shorter than a user would wait for a killed one.
LEASE_SECONDS = 180


def enabled() -> bool:
    mode = settings.BUDDY_SEMANTIC_SEARCH
    if mode == "off":
        return False
    if mode == "on":
        return True
    return encoder.available()


def _embed(texts: list[str]) -> np.ndarray:
    """Unit vectors of `texts`; an empty text gets the zero vector (nothing to find it by)."""
    vectors = np.zeros((len(texts), encoder.DIMENSIONS), dtype=np.float32)
    filled = [index for index, text in enumerate(texts) if text.strip()]
    if filled:
        vectors[filled] = encoder.encode([texts[index] for index in filled])
    return vectors


def vectors_update(session_id: int) -> int:
    """The task: write the vectors of the session's messages after the newest one that has a vector
    (from its first message when none has), in id order, BATCH at a time, for at most JOB_SECONDS
    before it queues the next job; returns how many were written. One job per session at a time (a
    lease; another returns at once). Safe after a worker was killed: a vector depends only on its
    message and the one before, and each is written once (a conflicting insert is ignored)."""
    if not enabled() or not _lease_take(session_id):
        return 0
    try:
        newest = (
            MessageVector.objects.filter(session_id=session_id)
            .order_by("-message_id")
            .values_list("message_id", flat=True)
            .first()
        ) or 0
        previous_text = (
            Message.objects.filter(session_id=session_id, id__lte=newest)
            .order_by("-id")
            .annotate(text=MESSAGE_TEXT)
            .values_list("text", flat=True)
            .first()
            or ""
        )
        written, deadline, unindexed = 0, time.monotonic() + JOB_SECONDS, False
        while rows := list(
            Message.objects.filter(session_id=session_id, id__gt=newest)
            .order_by("id")
            .annotate(text=MESSAGE_TEXT)
            .values_list("id", "text", "search_document__message_id")[:BATCH]
        ):
            # A message's text comes from its search document: one archived without it yet (a turn's
            # reply, indexed once it is out) stops the job, whose indexing queues the next one.
            indexed = list(takewhile(lambda row: row[2] is not None, rows))
            unindexed = len(indexed) < len(rows)
            if indexed:
                texts = [(message_id, text) for message_id, text, _ in indexed]
                _write(session_id, texts, previous_text)
                written += len(texts)
                newest, previous_text = texts[-1]
            if unindexed or time.monotonic() > deadline:
                break  # a long backlog (an import) goes on in a new job, inside the engine's timeout
    finally:
        _lease_release(session_id)
    # A message that came after the last batch, while this job held the lease, saw its own job return
    # at once: queue one for it.
    if not unindexed and Message.objects.filter(session_id=session_id, id__gt=newest).exists():
        vectors_schedule(session_id=session_id)
    return written


def _lease_take(session_id: int) -> bool:
    """The session's vector lease (conversations.leases). While a running job holds it, that job goes on
    to the newest message before it stops."""
    return lease_row_take(VectorLease, ttl=timedelta(seconds=LEASE_SECONDS), session_id=session_id)


def _lease_release(session_id: int) -> None:
    VectorLease.objects.filter(session_id=session_id).delete()


def vectors_fill(session_id: int) -> int:
    """Give every message of the session that has no vector one, wherever it lies (an archive from
    before semantic search, a job that never ran); returns how many were written. For
    `manage.py embed_history`: it reads the whole session."""
    after, previous_text, written = 0, "", 0
    while rows := list(
        Message.objects.filter(session_id=session_id, id__gt=after)
        .order_by("id")
        .annotate(text=MESSAGE_TEXT)
        .values_list("id", "text", "vector__message_id")[:1000]
    ):
        run: list[tuple[int, str]] = []  # consecutive messages without a vector
        run_previous = previous_text
        for message_id, text, has_vector in rows:
            if has_vector is None:
                if not run:
                    run_previous = previous_text
                run.append((message_id, text))
            elif run:
                written += _write_batched(session_id, run, run_previous)
                run = []
            previous_text = text
        if run:
            written += _write_batched(session_id, run, run_previous)
        after = rows[-1][0]
    return written


def _write_batched(session_id: int, rows: list[tuple[int, str]], previous_text: str) -> int:
    for start in range(0, len(rows), BATCH):
        _write(session_id, rows[start : start + BATCH], rows[start - 1][1] if start else previous_text)
    return len(rows)


def _write(session_id: int, rows: list[tuple[int, str]], previous_text: str) -> None:
    """Write the vectors of consecutive messages `rows` ((id, text)) of a session; `previous_text` is
    the text of the message before the first ("" for the session's first: an empty text embeds as 0)."""
    # What a message says, not who says it: a speaker label ("Caroline: …") is the speaker cue's
    # (textsearch.cues), and in a sentence vector it pulls towards every message of that speaker.
    own = _embed([without_label(text) for text in [previous_text] + [text for _, text in rows]])
    combined = own[1:] + CONTEXT_WEIGHT * own[:-1]
    with transaction.atomic():
        created = MessageVector.objects.bulk_create(
            [
                MessageVector(message_id=message_id, session_id=session_id, vector=vector)
                for (message_id, _), vector in zip(rows, pack_rows(combined), strict=True)
            ],
            ignore_conflicts=True,
        )
        index_count(session_id=session_id, added=len(created))


def index_count(*, session_id: int, added: int) -> None:
    """Add `added` to the chat's count of messages with a vector (VectorIndex)."""
    from django.db.models import F

    if not VectorIndex.objects.filter(session_id=session_id).update(indexed=F("indexed") + added):
        VectorIndex.objects.get_or_create(session_id=session_id, defaults={"indexed": 0})
        VectorIndex.objects.filter(session_id=session_id).update(indexed=F("indexed") + added)


# A chat's turns come in bursts; one job per burst indexes them all (conversations.bursts).
_vector_bursts = Bursts(lambda session_id: _vectors_queue(session_id), span=5.0, name="vector")


def vectors_schedule(*, session_id: int) -> None:
    """Queue the vector job of a session (after each turn, after an import): one job for a burst of
    turns, and always one after its last turn. (Inline task runs, as in the tests, queue at once.)"""
    if not enabled():
        return
    if settings.Q_CLUSTER.get("sync"):
        _vectors_queue(session_id)
        return
    _vector_bursts.schedule(session_id)


def _vectors_queue(session_id: int) -> None:
    from django_q.tasks import async_task

    async_task("memory.semantic.vectors_update", session_id, group="vectors", save=False)


# The process's threads for a search's semantic side (onnxruntime's and numpy's work release the GIL).
_encoding = ProcessThreads(workers=2, name="query-encoder")


def _pool() -> ThreadPoolExecutor:
    return _encoding.pool()


def query_vector(query: str) -> Future:
    """The query's vector (encoder.encode_query), computed on a thread of the pool."""
    return _pool().submit(encoder.encode_query, query)


def warm_up() -> Future | None:
    """Build, on the pool, what a process's first search would otherwise wait for (the model, its
    8-bit graph, the window's quantizer and scan): called once a process starts serving
    (buddy/asgi.py). None when semantic search is off."""
    if not enabled():
        return None
    return _pool().submit(_warm_up)


def _warm_up() -> None:
    try:
        vector = encoder.encode_query("What did we decide?")
        window = _as_window([(1, pack(vector))], checked_at=0.0)
        quantized.similarities(window.codes, window.scales, vector)
    except Exception:  # the first search will say why, and go on by words
        logger.warning("Semantic search could not warm up", exc_info=True)


@dataclass(frozen=True)
class Nearest:
    """A search's semantic side: the question's similarity to every vector of the session's window,
    and the NEIGHBOURS nearest of them that are at least MIN_SIMILARITY similar (id → similarity)."""

    window: _Window
    vector: np.ndarray
    scores: np.ndarray  # a similarity per window row
    nearest: dict[int, float]
    mean: float  # of `scores`: a similarity's z-score is (similarity - mean) / deviation
    deviation: float


@dataclass(frozen=True)
class Pending:
    """A search's semantic side under way (`nearest`): `result()` is its `Nearest`."""

    window_start: int  # messages with a smaller id are not in the window: the search fetches their vectors
    future: Future
    encoding: Future | None = None  # the question's vector (query_vector), which other chats' searches may share

    def result(self) -> Nearest:
        """Raises TimeoutError past RESULT_SECONDS (a process's first search builds the encoder)."""
        return self.future.result(timeout=RESULT_SECONDS)


def nearest(
    *,
    session_id: int,
    query: str,
    indexed: int | None = None,
    messages: int | None = None,
    encoding: Future | None = None,
) -> Pending:
    """Start a search's semantic side: the question is encoded on the pool, and the window scanned by
    the thread that finishes the encoding, while the caller looks up the words; only reading the window
    (a query for the vectors written since the last search, skipped when `indexed`, the chat's
    VectorIndex count as the caller just read it, shows none was; `messages`, the chat's count of
    messages, tells a chat that fits in a window, whose vectors are read whole) happens here, on the
    caller's connection. No thread waits for another. `encoding`: the query's vector already under way
    (query_vector), if the caller started it."""
    encoding = encoding or query_vector(query)
    window = _window(session_id, indexed=indexed, messages=messages)
    result: Future = Future()

    def scan(done: Future) -> None:
        try:
            result.set_result(_scan(window, done.result()))
        except Exception as error:  # handed to the caller, which ranks by words
            result.set_exception(error)

    encoding.add_done_callback(scan)
    return Pending(window_start=int(window.ids[0]) if window.size else 2**62, future=result, encoding=encoding)


def _scan(window: _Window, vector: np.ndarray) -> Nearest:
    scores = quantized.similarities(window.codes, window.scales, vector)
    rows = np.argpartition(-scores, NEIGHBOURS)[:NEIGHBOURS] if len(scores) > NEIGHBOURS else range(len(scores))
    nearest = {int(window.ids[row]): float(scores[row]) for row in rows if scores[row] >= MIN_SIMILARITY}
    mean = float(scores.mean()) if len(scores) else 0.0
    deviation = float(scores.std()) if len(scores) > 1 else 0.0
    return Nearest(window=window, vector=vector, scores=scores, nearest=nearest, mean=mean, deviation=deviation or 1.0)


def similarities(*, near: Nearest, ids: list[int], vectors: dict[int, bytes]) -> dict[int, float]:
    """The question's similarity to the messages `ids` that have a vector: from the window's scan, or
    for those older than the window from `vectors` (id → packed vector, fetched with their rows)."""
    similarity: dict[int, float] = {}
    window_ids = near.window.ids
    if ids and len(window_ids):
        wanted = np.array(ids, dtype=np.int64)
        positions = np.searchsorted(window_ids, wanted).clip(0, len(window_ids) - 1)
        inside = window_ids[positions] == wanted
        for message_id, position in zip(wanted[inside].tolist(), positions[inside].tolist(), strict=True):
            similarity[message_id] = float(near.scores[position])
    if vectors:
        scores = unpack(list(vectors.values())) @ near.vector
        similarity.update(zip(vectors, scores.tolist(), strict=True))
    return similarity


def next_similarities(*, near: Nearest, ids: list[int]) -> dict[int, float]:
    """The question's similarity to the message after each of `ids` in the window (the next vector of
    the session: a reply, or the rest of a turn), for those of `ids` that are in the window and not its
    newest."""
    window_ids = near.window.ids
    if not ids or len(window_ids) < 2:
        return {}
    wanted = np.array(ids, dtype=np.int64)
    positions = np.searchsorted(window_ids, wanted).clip(0, len(window_ids) - 1)
    inside = (window_ids[positions] == wanted) & (positions < len(window_ids) - 1)
    return dict(zip(wanted[inside].tolist(), near.scores[positions[inside] + 1].tolist(), strict=True))


def candidate_similarities(*, session_id: int, ids: list[int], vector: np.ndarray) -> dict[int, float]:
    """The similarity of `vector` to each message of `ids` (of one session): from its stored vector, or
    for one still waiting for it, from its text encoded now, as a question is (encoder.encode_query:
    several times faster than the stored vectors' encoder; without the share of the message before
    it, which the stored vectors hold)."""
    stored = dict(
        MessageVector.objects.filter(session_id=session_id, message_id__in=ids).values_list("message_id", "vector")
    )
    waiting = [message_id for message_id in ids if message_id not in stored]
    similarity: dict[int, float] = {}
    if stored:
        similarity.update(zip(stored, (unpack(list(stored.values())) @ vector).tolist(), strict=True))
    if waiting:
        texts = dict(
            Message.objects.filter(session_id=session_id, id__in=waiting)
            .annotate(text=MESSAGE_TEXT)
            .values_list("id", "text")
        )
        waiting = [message_id for message_id in waiting if message_id in texts]
        for message_id in waiting:
            text = without_label(texts[message_id])
            similarity[message_id] = float(encoder.encode_query(text) @ vector) if text.strip() else 0.0
    return similarity


def indexing_estimate(*, session_id: int, messages: int, sample: int = 32) -> tuple[int, float]:
    """(messages still waiting for their vectors, seconds one job at a time needs to write them),
    the seconds from encoding a sample of the chat's newest messages on this machine now."""
    waiting = messages - index_progress(session_id=session_id, messages=messages)[1]
    if waiting <= 0:
        return 0, 0.0
    texts = list(
        session_messages_since(session_id=session_id, since=0)
        .order_by("-session_id", "-id")
        .annotate(text=MESSAGE_TEXT)
        .values_list("text", flat=True)[:sample]
    )
    started = time.perf_counter()
    _embed([without_label(text) for text in texts])
    per_message = (time.perf_counter() - started) / max(1, len(texts))
    return waiting, waiting * per_message


def ready(*, messages: int, indexed: int) -> bool:
    """Whether a chat of `messages` with `indexed` vectors (index_progress) has them all but the newest
    UNINDEXED_ALLOWANCE."""
    return indexed >= messages - UNINDEXED_ALLOWANCE


def index_progress(*, session_id: int, messages: int) -> tuple[int, int]:
    """(messages, messages with a vector) of the chat, from counters: the same cost at any size."""
    indexed = VectorIndex.objects.filter(session_id=session_id).values_list("indexed", flat=True).first() or 0
    return messages, min(indexed, messages)


@dataclass(frozen=True)
class _Window:
    ids: np.ndarray  # ascending
    codes: np.ndarray  # int8, (DIMENSIONS, len(ids)): a column per id, its vector ≈ codes × scales
    scales: np.ndarray  # float32, one per id
    checked_at: float  # time.monotonic() when it was last checked whole against the database
    # The chat's VectorIndex count read before the window was last brought up to date (None: unknown).
    # Every vector written adds to it, so while it stays the same no newer vector needs reading.
    indexed: int | None = None

    @property
    def size(self) -> int:
        return len(self.ids)


_windows: OrderedDict[int, _Window] = OrderedDict()
_windows_vectors = 0  # the vectors of the windows in _windows, kept with it (under _windows_lock)
_windows_lock = threading.Lock()


def _window(session_id: int, *, indexed: int | None = None, messages: int | None = None) -> _Window:
    """The session's newest WINDOW vectors. Kept per process (least recently used out past
    CACHED_VECTORS in all): a search then reads only the vectors written since the last one, and
    nothing when `indexed` (the chat's VectorIndex count, read by the caller before this) is what it
    was then. At most every CHECK_SECONDS a count also tells whether any older one came or went (a gap
    filled by embed_history, a message deleted), and if so the window is read again: all of the chat's
    vectors when it has at most WINDOW `messages` (a simpler query)."""
    with _windows_lock:
        cached = _windows.get(session_id)
    window = replace(_window_read(session_id, cached, indexed=indexed, messages=messages), indexed=indexed)
    global _windows_vectors
    with _windows_lock:
        replaced = _windows.get(session_id)
        _windows_vectors += window.size - (replaced.size if replaced is not None else 0)
        _windows[session_id] = window
        _windows.move_to_end(session_id)
        while _windows_vectors > CACHED_VECTORS and len(_windows) > 1:
            _, evicted = _windows.popitem(last=False)
            _windows_vectors -= evicted.size
    return window


def windows_forget() -> None:
    """Drop the process's cached windows (the tests: a rolled-back database reuses ids)."""
    global _windows_vectors
    with _windows_lock:
        _windows.clear()
        _windows_vectors = 0


def _window_read(session_id: int, cached: _Window | None, *, indexed: int | None, messages: int | None) -> _Window:
    if cached is not None and cached.size:
        window = cached
        if indexed is None or indexed != cached.indexed:
            new = _as_window(_query("after", session_id, int(cached.ids[-1]), WINDOW), checked_at=cached.checked_at)
            window = _appended(cached, new) if new.size else cached
        if time.monotonic() - window.checked_at < CHECK_SECONDS:
            return window
        ((count, total),) = _query("count", session_id, int(window.ids[0]))
        if count == window.size and total == int(window.ids.sum()):
            return replace(window, checked_at=time.monotonic())
    if messages is not None and messages <= WINDOW:
        return _as_window(_query("whole", session_id), checked_at=time.monotonic())
    return _as_window(_query("window", session_id, WINDOW), checked_at=time.monotonic())


# The window's queries: on PostgreSQL, functions of these names with their own planner settings
# (memory/semantic/postgres.py); on SQLite the same SQL, which its planner gets right by itself.
_QUERIES = {
    "after": (
        "memory_vectors_after",
        "SELECT message_id, vector FROM memory_messagevector WHERE session_id = %s AND message_id > %s"
        " ORDER BY message_id DESC LIMIT %s",
    ),
    "whole": (
        "memory_vectors_whole",
        "SELECT message_id, vector FROM memory_messagevector WHERE session_id = %s",
    ),
    "count": (
        "memory_vectors_count",
        "SELECT count(*), sum(message_id) FROM memory_messagevector WHERE session_id = %s AND message_id >= %s",
    ),
    "window": (
        "memory_vectors_window",
        "SELECT message_id, vector FROM memory_messagevector WHERE session_id = %s AND message_id >= coalesce("
        "(SELECT message_id FROM memory_messagevector WHERE session_id = %s"
        " ORDER BY session_id DESC, message_id DESC LIMIT 1 OFFSET %s), 0)",
    ),
}


def _query(name: str, session_id: int, *arguments: int) -> list[tuple]:
    function, sql = _QUERIES[name]
    # Inside a caller's transaction, a savepoint: a failing query must not abort the caller's transaction
    # (the search goes on by words). Outside one, no round trips for it.
    savepoint = transaction.atomic() if connection.in_atomic_block else nullcontext()
    with savepoint:
        if connection.vendor == "postgresql":
            placeholders = ", ".join(["%s"] * (1 + len(arguments)))
            return binary_rows(f"SELECT * FROM {function}({placeholders})", [session_id, *arguments])
        with connection.cursor() as cursor:
            if name == "window":  # the session twice, and the offset of the oldest vector kept
                cursor.execute(sql, [session_id, session_id, arguments[0] - 1])
            else:
                cursor.execute(sql, [session_id, *arguments])
            return cursor.fetchall()


def _as_window(rows: list[tuple], *, checked_at: float) -> _Window:
    """Rows of (message id, stored vector) in any order → a window in id order."""
    ids = np.array([message_id for message_id, _ in rows], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    stored = packed([rows[index][1] for index in order])
    return _Window(
        ids=ids[order],
        codes=np.ascontiguousarray(stored["codes"].T),
        scales=stored["scale"].astype(np.float32),  # a contiguous copy
        checked_at=checked_at,
    )


def _appended(cached: _Window, new: _Window) -> _Window:
    """`cached` followed by `new`, the newest WINDOW of them (copied once, contiguous for the scan)."""
    keep = max(0, WINDOW - new.size)
    older = slice(cached.size - min(keep, cached.size), cached.size)
    return _Window(
        ids=np.concatenate([cached.ids[older], new.ids]),
        codes=np.concatenate([cached.codes[:, older], new.codes], axis=1),
        scales=np.concatenate([cached.scales[older], new.scales]),
        checked_at=cached.checked_at,
    )
