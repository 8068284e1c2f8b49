"""Latency of search across all of a user's chats (`GET /search`) at 1M messages.

    .venv/bin/python bench/search_across.py [--semantic]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_search .venv/bin/python bench/search_across.py

The data set is bench/search.py's (built by it once, under var/bench/ on SQLite, and reused): its
sessions 2..1001 are 1,000 chats of 1,000 messages each. Two ownerships of those chats are timed, each
set before it is timed (an UPDATE of 1,000 rows and of their term rows, memory 0017; the messages
never move):

- one user: the 1,000 chats (1M messages) are one user's; the chat of 1M (session 1) is another's;
- 1,000 users: each chat is another user's, and each query is asked by one of them at random.

Each query (bench/search.py's: 1–6 terms, a third of them common) is timed end to end through
memory.search.across.search_all_chats(limit=20), what `GET /search` runs, after a warm-up: words only,
and with `--semantic` also with semantic search on (random vectors, bench/search.py --semantic); with
`--serial` also with the chats searched one after the other on one connection, as inside a transaction
(what searching the later chats at once on the chat-search threads saves).
Reported too: the choice of chats alone (memory.search.across.chats_chosen) and the chats a search
ranked in full.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.contrib.auth import get_user_model  # noqa: E402  (the path above first)
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import override_settings  # noqa: E402

from bench import search as data_set  # noqa: E402  (sets up Django on its database: var/bench/ or DATABASE_URL)
from memory.search import across  # noqa: E402
from memory.search import postgres as pg_backend  # noqa: E402
from memory.search import sqlite as sqlite_backend  # noqa: E402
from textsearch.text import query_terms  # noqa: E402

CHATS = range(2, 1002)
LIMIT = 20


def users() -> tuple[object, list[object]]:
    """The one user of 1,000 chats, and 1,000 users (created once)."""
    model = get_user_model()
    one, _ = model.objects.get_or_create(username="across-bench")
    names = [f"across-bench-{number}" for number in CHATS]
    existing = set(model.objects.filter(username__in=names).values_list("username", flat=True))
    model.objects.bulk_create([model(username=name) for name in names if name not in existing])
    many = {user.username: user for user in model.objects.filter(username__in=names)}
    return one, [many[name] for name in names]


def own(owners: list[object]) -> None:
    """Session `CHATS[i]` becomes `owners[i]`'s. Their term rows (millions) move with them, in one
    statement, with the (user, term) index built again after it, as memory 0017 fills and builds them:
    row by row through the trigger that moves a chat's rows (memory_search_session_owner) it would take
    most of an hour on PostgreSQL."""
    backend = pg_backend if connection.vendor == "postgresql" else sqlite_backend
    owner_of = {session_id: owner.pk for owner, session_id in zip(owners, CHATS, strict=True)}
    if owned(owners):
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS memory_search_term_user")
        if connection.vendor == "postgresql":  # no trigger in this transaction (the users exist)
            cursor.execute("SET LOCAL session_replication_role = replica")
        else:
            cursor.execute("DROP TRIGGER IF EXISTS memory_search_session_owner")
        cursor.executemany(
            "UPDATE conversations_session SET user_id = %s WHERE id = %s",
            [(owner_pk, session_id) for session_id, owner_pk in owner_of.items()],
        )
        cursor.execute(
            "UPDATE memory_search_term SET user_id = s.user_id FROM conversations_session AS s"
            " WHERE s.id = memory_search_term.session_id AND memory_search_term.session_id BETWEEN %s AND %s",
            [CHATS[0], CHATS[-1]],
        )
        if connection.vendor == "sqlite":
            cursor.execute(next(sql for sql in backend.OWNER_INSTALL if "memory_search_session_owner" in sql))
        cursor.execute(backend.OWNER_INDEX)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # as autovacuum would have by then: the moved rows' old versions gone
            cursor.execute("VACUUM (ANALYZE) conversations_session, memory_search_term")


def owned(owners: list[object]) -> bool:
    """Whether session `CHATS[i]` is `owners[i]`'s for every i."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, user_id FROM conversations_session WHERE id BETWEEN %s AND %s", [CHATS[0], CHATS[-1]]
        )
        owner_of = {session_id: owner.pk for owner, session_id in zip(owners, CHATS, strict=True)}
        return all(owner_of[session_id] == user_id for session_id, user_id in cursor.fetchall())


def time_searches(label: str, pairs: list[tuple[object, str]], *, serial: bool = False) -> None:
    """Two passes over the same (user, query) pairs, as bench/search.py times a chat's search. `serial`:
    each inside a transaction, where the chats are searched one after the other on this thread's
    connection instead of at once on the chat-search threads (memory.search.across._chats_searched)."""
    for user, query in pairs[:20]:  # warm-up: connection, stemmer cache, the encoder, the threads
        across.search_all_chats(user=user, query=query, limit=LIMIT)
    for name in ("first pass", "second pass"):
        timings = []
        for user, query in pairs:
            started = time.perf_counter()
            with transaction.atomic() if serial else nullcontext():
                across.search_all_chats(user=user, query=query, limit=LIMIT)
            timings.append((time.perf_counter() - started) * 1000)
        print(
            f"{label + ', ' + name:<52} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
            f"p95 {data_set.percentile(timings, 0.95):6.1f} ms  max {max(timings):7.1f} ms  "
            f">50 ms: {sum(t > 50 for t in timings)}",
            flush=True,
        )


def time_choice(label: str, pairs: list[tuple[object, str]]) -> None:
    """The choice of chats alone: the user's chats with the query's terms, scored."""
    timings, searched = [], []
    for user, query in pairs:
        started = time.perf_counter()
        choice = across.chats_chosen(user_id=user.pk, agent_id=None, terms=query_terms(query), spans=[])
        timings.append((time.perf_counter() - started) * 1000)
        searched.append(len(choice.chats))
    print(
        f"{label + ', choice of chats alone':<52} n={len(timings):<4} median {statistics.median(timings):6.1f} ms  "
        f"p95 {data_set.percentile(timings, 0.95):6.1f} ms  chats ranked in full: median "
        f"{statistics.median(searched):.0f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--semantic", action="store_true", help="also with semantic search (random vectors)")
    parser.add_argument(
        "--serial", action="store_true", help="also with the chats searched one after the other (in a transaction)"
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if not data_set.built():
        data_set.build()
    if args.semantic:
        data_set.vectors_build()
    print(f"backend: {connection.vendor}; CHATS_SEARCHED = {across.CHATS_SEARCHED}", flush=True)
    queries = data_set.make_queries(args.queries, seed=7)
    one, many = users()
    rng = random.Random(11)
    layouts = [
        ("1 user, 1M over 1,000 chats", [one] * len(CHATS), [(one, query) for query in queries]),
        ("1,000 users of 1,000 messages", many, [(rng.choice(many), query) for query in queries]),
    ]
    layouts.sort(key=lambda layout: not owned(layout[1]))  # the one in place first: a move takes minutes
    for label, owners, pairs in layouts:
        own(owners)
        time_choice(label, pairs)
        with override_settings(BUDDY_SEMANTIC_SEARCH="off"):
            time_searches(f"{label}, words", pairs)
            if args.serial:
                time_searches(f"{label}, words, one after the other", pairs, serial=True)
        if args.semantic:
            with override_settings(BUDDY_SEMANTIC_SEARCH="on"):
                time_searches(f"{label}, semantic", pairs)
                if args.serial:
                    time_searches(f"{label}, semantic, one after the other", pairs, serial=True)


if __name__ == "__main__":
    main()
