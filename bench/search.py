"""Latency of history search at 1M messages: one session of 1M, and 1M over 1,000 sessions.

    .venv/bin/python bench/search.py                    # SQLite: var/bench/search.sqlite3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_search .venv/bin/python bench/search.py

The database is built once (bulk inserts in big transactions on SQLite, COPY on PostgreSQL, with the
search index and statistics built after the load, the way the migration backfills them) and reused;
`--rebuild` starts over. Messages are Zipf-distributed pseudo-words with stop words mixed in; a few
hundred terms are in at least 1 % of the messages, as common words are in a real chat.

Queries have 1–6 terms after stop-word removal, and about a third of their terms are among those in
≥ 1 % of the messages. Each is timed end to end through memory.search.search_history (limit 10),
after a warm-up, words only; with `--semantic` also with semantic search on (memory.semantic), and
where its time goes. The `LIKE` baselines (the original design) are timed on a sample. Also reported:
how much the candidate bounds change the top 10 against an unbounded ranking, and with `--appends N`
what keeping the index costs a message append.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")  # as in production: no query log kept per query
if not os.environ.get("DATABASE_URL"):
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench' / 'search.sqlite3'}"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import override_settings  # noqa: E402

from memory import search  # noqa: E402
from memory.search import postgres as pg_backend  # noqa: E402
from memory.search import sqlite as sqlite_backend  # noqa: E402
from textsearch.text import (  # noqa: E402
    QUERY_STOP_WORDS,
    STOP_WORDS,
    index_terms,
    join_terms,
    query_terms,
    search_context,
)

BIG_SESSION_MESSAGES = 1_000_000
SMALL_SESSIONS = 1_000
SMALL_SESSION_MESSAGES = 1_000
VOCABULARY = 50_000
ZIPF_OFFSET = 20  # the very top of a Zipf curve is stop words, which are dropped
STOP = sorted(STOP_WORDS - {"i"})


def pseudo_words(rng: random.Random, count: int) -> list[str]:
    """Pronounceable, distinct, stem-stable words ("kavomi"): the stemmer leaves them alone."""
    consonants, vowels = "bdfgklmnprtvz", "aiou"
    words: set[str] = set()
    while len(words) < count:
        syllables = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    ordered = sorted(words)  # a set's order depends on the process's hash seed: sort before shuffling
    rng.shuffle(ordered)
    return ordered


class TextSource:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = pseudo_words(self.rng, VOCABULARY)
        weights = [1 / (rank + ZIPF_OFFSET) for rank in range(VOCABULARY)]
        total = sum(weights)
        self.cumulative = []
        running = 0.0
        for weight in weights:
            running += weight / total
            self.cumulative.append(running)

    def message(self) -> str:
        rng = self.rng
        length = max(3, min(120, int(rng.lognormvariate(3.0, 0.6))))
        content_words = self.rng.choices(self.words, cum_weights=self.cumulative, k=length)
        out = []
        for word in content_words:
            if rng.random() < 0.8:
                out.append(rng.choice(STOP))
            out.append(word)
        return " ".join(out).capitalize() + "."


def rows(source: TextSource, session_id: int, count: int, first_id: int, start: datetime):
    """(id, session_id, role, content, tokens, is_turn_start, largest_block_tokens, search_text,
    search_terms, search_context, created_at) for `count` messages of one session."""
    previous_terms = ""
    for offset in range(count):
        text = source.message()
        role = "user" if offset % 2 == 0 else "assistant"
        content = json.dumps([{"type": "text", "text": text}], ensure_ascii=False, separators=(",", ":"))
        tokens = math.ceil(len(content) / 4)
        terms = join_terms(index_terms(text))
        context = search_context(previous=previous_terms, turn_start=None) if offset else ""
        previous_terms = terms
        yield (
            first_id + offset,
            session_id,
            role,
            content,
            tokens,
            role == "user",
            tokens,
            text,
            terms,
            context,
            (start + timedelta(seconds=30 * offset)).isoformat(),
        )


def all_rows(user_id: int, agent_id: int):
    """Session 1 of the bench holds 1M messages; sessions 2..1001 hold 1,000 each."""
    source = TextSource(seed=42)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    next_id = 1
    yield from rows(source, 1, BIG_SESSION_MESSAGES, next_id, start)
    next_id += BIG_SESSION_MESSAGES
    for session_id in range(2, SMALL_SESSIONS + 2):
        yield from rows(source, session_id, SMALL_SESSION_MESSAGES, next_id, start)
        next_id += SMALL_SESSION_MESSAGES


SQLITE_FILE = ROOT / "var" / "bench" / "search.sqlite3"


def sqlite_built() -> bool:
    """Whether the SQLite bench database holds the whole data set (not one being built right now by
    another run: its rows would be copied half-way)."""
    import sqlite3

    if not SQLITE_FILE.exists():
        return False
    try:
        with closing(sqlite3.connect(f"file:{SQLITE_FILE}?mode=ro", uri=True)) as source:
            last = source.execute("SELECT 1 FROM conversations_message WHERE session_id = 1001 LIMIT 1")
            return last.fetchone() is not None
    except sqlite3.Error:
        return False


def rows_from_sqlite():
    """The SQLite bench database's rows, when it is built: the same data set, without generating it
    again (generation, not COPY, is the slow part of a build)."""
    import sqlite3

    with sqlite3.connect(SQLITE_FILE) as source:
        cursor = source.execute(
            "SELECT m.id, m.session_id, m.role, m.content, m.tokens, m.is_turn_start, m.largest_block_tokens,"
            " d.text, d.terms, d.context, m.created_at"
            " FROM conversations_message AS m JOIN memory_searchdocument AS d ON d.message_id = m.id ORDER BY m.id"
        )
        while batch := cursor.fetchmany(10_000):
            for row in batch:
                yield (*row[:5], bool(row[5]), *row[6:])


# A generated row (rows) is written as a message and its search document.
MESSAGE_COLUMNS = "id, session_id, role, content, tokens, is_turn_start, largest_block_tokens, created_at"
DOCUMENT_COLUMNS = "message_id, session_id, text, terms, context, tokens"
TABLES = {"conversations_message": MESSAGE_COLUMNS, "memory_searchdocument": DOCUMENT_COLUMNS}


def split_row(row: tuple) -> dict[str, tuple]:
    """A generated row's values for each table of TABLES."""
    return {
        "conversations_message": (*row[:7], row[10]),
        "memory_searchdocument": (row[0], row[1], row[7], row[8], row[9], row[4]),
    }


def build() -> None:
    from django.contrib.auth import get_user_model

    from conversations.models import Agent, Session

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="search-bench")
    agent = Agent.objects.get(slug="buddy")
    with transaction.atomic():
        Session.objects.bulk_create(
            [Session(id=number, user=user, agent=agent, chat_id=f"bench-{number}") for number in range(1, 1002)]
        )
    vendor = connection.vendor
    backend = sqlite_backend if vendor == "sqlite" else pg_backend
    # Load without the index, then build it in one pass: what the migration's backfill does.
    with connection.cursor() as cursor:
        for statement in backend.UNINSTALL:
            cursor.execute(statement)
    print("loading messages…", flush=True)
    if vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=OFF")
        inserts = {
            table: f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(columns.split(',')))})"
            for table, columns in TABLES.items()
        }
        batch: list[tuple] = []

        def write(batch: list[tuple]) -> None:
            with transaction.atomic(), connection.cursor() as cursor:
                for table, insert in inserts.items():
                    cursor.executemany(insert, [split_row(row)[table] for row in batch])

        for row in all_rows(user.id, agent.id):
            batch.append(row)
            if len(batch) >= 100_000:
                write(batch)
                batch = []
        if batch:
            write(batch)
    else:
        raw = connection.connection
        from_sqlite = sqlite_built()
        for table, columns in TABLES.items():  # one COPY at a time on a connection: a pass per table
            with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows_from_sqlite() if from_sqlite else all_rows(user.id, agent.id):
                    copy.write_row(split_row(row)[table])
        raw.commit()
    loaded = time.perf_counter()
    print(f"  {loaded - started:.0f} s; building the search index…", flush=True)
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SET maintenance_work_mem = '512MB'")  # a faster GIN build
        for statement in backend.INSTALL + backend.BACKFILL:
            cursor.execute(statement)
        if vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence('conversations_message', 'id'), 3000000)")
            cursor.execute("SELECT setval(pg_get_serial_sequence('conversations_session', 'id'), 2000)")
            # As autovacuum would have by then (a server with autovacuum off, as this machine's CI
            # configuration, never does): hint bits set and the visibility map written, once.
            cursor.execute("VACUUM (ANALYZE)")
        else:
            cursor.execute("ANALYZE")
    print(
        f"  {time.perf_counter() - loaded:.0f} s; total build {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def vectors_build() -> None:
    """A vector for every message (memory_messagevector), for timing semantic search. Random unit
    vectors: the bench's messages are pseudo-words, and embedding 2M of them would take hours, while
    what a search costs (the query's encoding, the window scan, the candidates' vectors) does not
    depend on the values. Built once, like the messages."""
    import numpy as np

    from memory import semantic
    from memory.models import MessageVector

    if MessageVector.objects.filter(session_id=1001).exists():
        _vector_counts()
        return
    started = time.perf_counter()
    print("writing random vectors for semantic search…", flush=True)
    rng = np.random.default_rng(5)
    insert = "INSERT INTO memory_messagevector (message_id, session_id, vector) VALUES (%s, %s, %s)"
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, session_id FROM conversations_message ORDER BY id")
        pairs = cursor.fetchall()
    for start in range(0, len(pairs), 100_000):
        chunk = pairs[start : start + 100_000]
        vectors = rng.standard_normal((len(chunk), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [
            (message_id, session_id, semantic.pack(vector))
            for (message_id, session_id), vector in zip(chunk, vectors, strict=True)
        ]
        if connection.vendor == "postgresql":
            raw = connection.connection
            with (
                raw.cursor() as cursor,
                cursor.copy("COPY memory_messagevector (message_id, session_id, vector) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(row)
            raw.commit()
        else:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(insert, rows)
    with connection.cursor() as cursor:
        # As autovacuum would have by then: on PostgreSQL the visibility map lets counts of a chat's
        # vectors read the index alone.
        cursor.execute("VACUUM ANALYZE memory_messagevector" if connection.vendor == "postgresql" else "ANALYZE")
    _vector_counts()
    print(f"  {time.perf_counter() - started:.0f} s", flush=True)


def _vector_counts() -> None:
    """Each session's count of indexed messages (memory.models.VectorIndex), as the vector jobs keep it:
    the vectors were written by COPY here, so search would take every chat for one still being indexed."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_vectorindex")
        cursor.execute(
            "INSERT INTO memory_vectorindex (session_id, indexed)"
            " SELECT session_id, count(*) FROM memory_messagevector GROUP BY session_id"
        )


def time_semantic_parts(session, queries: list[str]) -> None:
    """Where semantic search spends its time: the query's encoding and the window scan (its vectors
    kept by the process since the previous search: the scan reads only what is new)."""
    from devtools.synthetic_conversations import generate
    from embeddings import encoder, quantized
    from memory import semantic

    encode, exact, scan, natural, natural_exact = [], [], [], [], []
    for query in queries:
        started = time.perf_counter()
        vector = encoder.encode_query(query)
        encode.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        encoder.encode([query])
        exact.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        window = semantic._window(session.pk)
        quantized.similarities(window.codes, window.scales, vector)
        scan.append((time.perf_counter() - started) * 1000)
    # The bench's queries are pseudo-words, which the model's tokenizer cuts into many pieces (median 21
    # tokens); a natural question is about 10 (bench/recall.py's questions).
    for question in generate(seed=4, turns=2000).questions:
        started = time.perf_counter()
        encoder.encode_query(question.text)
        natural.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        encoder.encode([question.text])
        natural_exact.append((time.perf_counter() - started) * 1000)
    kind = "8-bit" if encoder._model().quantized() is not None else "float32: the 8-bit graph could not be built"
    for label, timings in (
        (f"query encoding ({kind}), these queries", encode),
        ("  the same in float32 (the stored vectors' encoder)", exact),
        (f"query encoding ({kind}), natural questions", natural),
        ("  the same in float32", natural_exact),
        (f"window scan ({semantic.WINDOW:,} vectors)", scan),
    ):
        print(
            f"{'  ' + label:<62} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
            f"p95 {percentile(timings, 0.95):6.1f} ms",
            flush=True,
        )


def built() -> bool:
    from conversations.models import Message

    try:
        return Message.objects.filter(session_id=1001).exists()
    except Exception:
        return False


# --- queries -----------------------------------------------------------------------------------
def make_queries(count: int, seed: int) -> list[str]:
    """Queries built from the big session's own vocabulary (its document frequencies, the same on both
    backends): each term is, with probability 0.35, one of the terms in >= 1 % of the messages, else a
    term drawn log-uniformly by frequency rank from the rest (mid-frequency and rare alike)."""
    rng = random.Random(seed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT term, df FROM memory_search_term WHERE session_id = 1 AND df > 0")
        ranked = sorted(cursor.fetchall(), key=lambda row: (-row[1], row[0]))
    threshold = BIG_SESSION_MESSAGES // 100
    common = [term for term, df in ranked if df >= threshold]
    rest = [term for term, df in ranked if df < threshold]
    queries = []
    for _ in range(count):
        terms = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.35:
                terms.append(rng.choice(common))
            else:
                terms.append(rest[int(math.exp(rng.uniform(0, math.log(len(rest))))) - 1])
        queries.append("What did we say about " + " and ".join(terms) + "?")
    return queries


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def time_queries(label: str, pairs: list[tuple[object, str]]) -> None:
    """Two passes over the same queries: the first reads from disk what it needs (this machine's page
    cache is small and shared), the second shows the same queries with their pages cached."""
    for session, query in pairs[:20]:  # warm-up: connection, stemmer cache
        search.search_history(session=session, query=query, limit=10)
    for name in ("first pass", "second pass"):
        timings = []
        for session, query in pairs:
            started = time.perf_counter()
            search.search_history(session=session, query=query, limit=10)
            timings.append((time.perf_counter() - started) * 1000)
        print(
            f"{label + ', ' + name:<46} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
            f"p95 {percentile(timings, 0.95):6.1f} ms  max {max(timings):7.1f} ms  "
            f">50 ms: {sum(t > 50 for t in timings)}",
            flush=True,
        )


def time_like(label: str, pairs: list[tuple[object, str]], per_word: bool) -> None:
    if not pairs:
        return
    timings = []
    with connection.cursor() as cursor:
        for session, query in pairs:
            started = time.perf_counter()
            if per_word:
                # The original had no stop words; dropping them here only makes the baseline faster.
                words = [w for w in query.rstrip("?").split() if w.lower() not in QUERY_STOP_WORDS][:8]
                where = " OR ".join(["text LIKE %s"] * len(words))
                cursor.execute(
                    f"SELECT message_id FROM memory_searchdocument WHERE session_id = %s AND ({where})"
                    " ORDER BY message_id DESC LIMIT 10",
                    [session.pk, *[f"%{w}%" for w in words]],
                )
            else:
                cursor.execute(
                    "SELECT message_id FROM memory_searchdocument WHERE session_id = %s AND text LIKE %s"
                    " ORDER BY message_id DESC LIMIT 10",
                    [session.pk, f"%{query}%"],
                )
            cursor.fetchall()
            timings.append((time.perf_counter() - started) * 1000)
    print(
        f"{label:<46} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
        f"p95 {percentile(timings, 0.95):6.1f} ms  max {max(timings):7.1f} ms",
        flush=True,
    )


@override_settings(BUDDY_SEMANTIC_SEARCH="off")
def bound_effect(session, queries: list[str]) -> None:
    """Words only, top 10 with the bounds against an unbounded ranking (every match of every term, all
    rescored), apart for queries whose every term is in the text of more than CANDIDATES_PER_TERM
    messages (all capped) and the rest."""
    bounded = {q: [h.message_id for h in search.search_history(session=session, query=q, limit=10)] for q in queries}
    saved = search.CANDIDATES_PER_TERM, search.RESCORED_CANDIDATES
    search.CANDIDATES_PER_TERM, search.RESCORED_CANDIDATES = 10**9, 10**9
    try:
        exact = {q: [h.message_id for h in search.search_history(session=session, query=q, limit=10)] for q in queries}
    finally:
        search.CANDIDATES_PER_TERM, search.RESCORED_CANDIDATES = saved
    groups: dict[str, list[str]] = {"a rarer term": [], "only common terms": []}
    for q in queries:
        _, term_stats, _ = search._statistics(session.pk, query_terms(q))
        common = all(df > search.CANDIDATES_PER_TERM for df, *_ in term_stats.values())
        groups["only common terms" if common else "a rarer term"].append(q)
    for name, group in groups.items():
        if not group:
            continue
        same_top = sum(bounded[q][:1] == exact[q][:1] for q in group)
        identical = sum(bounded[q] == exact[q] for q in group)
        overlap = statistics.mean(len(set(bounded[q]) & set(exact[q])) / max(1, len(exact[q])) for q in group)
        print(
            f"bounds vs unbounded, queries with {name} (n={len(group)}): same first hit {same_top}, "
            f"identical top 10 {identical}, mean overlap of top 10 {overlap:.3f}",
            flush=True,
        )


class _RolledBack(Exception):
    pass


def time_appends(session, count: int) -> None:
    """`message_append` on the big session, the search index and statistics kept by the triggers: the
    write cost of search. In one transaction, rolled back, so the data set stays as built (and on
    PostgreSQL the side table is vacuumed afterwards: dead rows would linger in its pages)."""
    if count <= 0:
        return
    from conversations.services import message_append

    source = TextSource(seed=99)
    timings = []
    try:
        with transaction.atomic():
            for index in range(count):
                text = source.message()
                started = time.perf_counter()
                message_append(session=session, role="user" if index % 2 == 0 else "assistant", content=text)
                timings.append((time.perf_counter() - started) * 1000)
            raise _RolledBack
    except _RolledBack:
        pass
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM memory_message_search, memory_search_term, memory_search_session")
    print(
        f"{'message_append, 1 session of 1M':<46} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
        f"p95 {percentile(timings, 0.95):6.1f} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--like-queries", type=int, default=20)
    parser.add_argument("--bound-queries", type=int, default=40)
    parser.add_argument("--appends", type=int, default=0, help="also time this many message appends (rolled back)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the data set (a quick trial run)")
    parser.add_argument(
        "--semantic", action="store_true", help="also time semantic search (writes random vectors once)"
    )
    args = parser.parse_args()
    global BIG_SESSION_MESSAGES, SMALL_SESSION_MESSAGES
    BIG_SESSION_MESSAGES = int(BIG_SESSION_MESSAGES * args.scale)
    SMALL_SESSION_MESSAGES = max(1, int(SMALL_SESSION_MESSAGES * args.scale))

    from conversations.models import Session

    call_command("migrate", verbosity=0)  # a data set built by an earlier version is brought up to date
    if args.rebuild or not built():
        if args.rebuild and connection.vendor == "sqlite":
            connection.close()
            Path(connection.settings_dict["NAME"]).unlink(missing_ok=True)
        build()
    print(f"backend: {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_search_term WHERE session_id = 1 AND df >= %s",
            [BIG_SESSION_MESSAGES // 100],
        )
        print(f"terms in >= 1 % of the big session's messages: {cursor.fetchone()[0]}")

    queries = make_queries(args.queries, seed=7)
    term_counts = [len(query_terms(q)) for q in queries]
    histogram = {n: term_counts.count(n) for n in sorted(set(term_counts))}
    print(f"{len(queries)} queries, terms per query: {histogram}")
    big = Session.objects.get(pk=1)
    rng = random.Random(11)
    small_sessions = list(Session.objects.filter(pk__gte=2, pk__lte=1001))
    big_pairs = [(big, q) for q in queries]
    small_pairs = [(rng.choice(small_sessions), q) for q in queries]

    with override_settings(BUDDY_SEMANTIC_SEARCH="off"):
        time_queries("search, 1 session of 1M", big_pairs)
        time_queries("search, 1M over 1,000 sessions", small_pairs)
    if args.semantic:
        vectors_build()
        with override_settings(BUDDY_SEMANTIC_SEARCH="on"):
            time_queries("semantic, 1 session of 1M", big_pairs)
            time_semantic_parts(big, queries[:100])
            time_queries("semantic, 1M over 1,000 sessions", small_pairs)
    time_like("LIKE phrase, 1 session of 1M", big_pairs[: args.like_queries], per_word=False)
    time_like("LIKE per word, 1 session of 1M", big_pairs[: args.like_queries], per_word=True)
    time_like("LIKE phrase, 1,000 sessions", small_pairs[: args.like_queries], per_word=False)
    time_like("LIKE per word, 1,000 sessions", small_pairs[: args.like_queries], per_word=True)
    if args.bound_queries:
        bound_effect(big, queries[: args.bound_queries])
    time_appends(big, args.appends)


if __name__ == "__main__":
    main()
