"""Latency of a question across chats that names a day or a month, for a user of 10,000 chats.

    .venv/bin/python bench/search_dated.py             # SQLite: var/bench/search_dated.sqlite3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_dated .venv/bin/python bench/search_dated.py

The data set (built once and reused; `--rebuild` starts over) is one user's 10,000 chats of 20 messages
each (bench/search.py's Zipf-distributed pseudo-words), each chat written on one day of 2024, so that a
day holds about 27 chats and a month about 830. Each question is 1–4 of the user's terms (a third of
them among the commonest) and a day ("on March 5, 2024") or a month ("in March 2024"). Timed after a
warm-up, two passes each: the choice of chats alone (memory.search.across.chats_chosen, what the days a
question names change) and the whole search (search_all_chats, limit 20, words only).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("DATABASE_URL"):
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench' / 'search_dated.sqlite3'}"

from django.contrib.auth import get_user_model  # noqa: E402  (DATABASE_URL above first)
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import override_settings  # noqa: E402

from bench import search as data_set  # noqa: E402  (sets up Django on the database above)
from conversations.models import Agent, Message, Session  # noqa: E402
from memory.search import across  # noqa: E402
from memory.search import postgres as pg_backend  # noqa: E402
from memory.search import sqlite as sqlite_backend  # noqa: E402
from textsearch.cues import date_spans  # noqa: E402
from textsearch.text import query_terms  # noqa: E402

CHATS = 10_000
CHAT_MESSAGES = 20
YEAR_START = datetime(2024, 1, 1, 9, tzinfo=UTC)
USERNAME = "dated-bench"


def chat_day(number: int) -> datetime:
    """The morning chat `number` (1-based) was written: the chats spread over the 366 days of 2024."""
    return YEAR_START + timedelta(days=(number * 7919) % 366)


def built() -> bool:
    try:
        return Message.objects.filter(session_id=CHATS).exists()
    except Exception:
        return False


def build() -> None:
    started = time.perf_counter()
    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    agent = Agent.objects.get(slug="buddy")
    Session.objects.filter(user=user).delete()  # a rebuild; the ids below are taken in any other database
    with transaction.atomic():
        Session.objects.bulk_create(
            [Session(id=number, user=user, agent=agent, chat_id=f"dated-{number}") for number in range(1, CHATS + 1)]
        )
    backend = sqlite_backend if connection.vendor == "sqlite" else pg_backend
    # Loaded without the search index, which is then built in one pass (bench/search.py does the same).
    with connection.cursor() as cursor:
        for statement in backend.UNINSTALL:
            cursor.execute(statement)
    source = data_set.TextSource(seed=42)
    rows = [
        row
        for number in range(1, CHATS + 1)
        for row in data_set.rows(source, number, CHAT_MESSAGES, (number - 1) * CHAT_MESSAGES + 1, chat_day(number))
    ]
    for table, columns in data_set.TABLES.items():
        insert = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(columns.split(',')))})"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(insert, [data_set.split_row(row)[table] for row in rows])
    with connection.cursor() as cursor:
        for statement in backend.INSTALL + backend.BACKFILL:
            cursor.execute(statement)
        if connection.vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence('conversations_message', 'id'), %s)", [len(rows)])
            cursor.execute("SELECT setval(pg_get_serial_sequence('conversations_session', 'id'), %s)", [CHATS])
            cursor.execute("VACUUM (ANALYZE)")  # as autovacuum would have by then
        else:
            cursor.execute("ANALYZE")
    print(f"built {CHATS} chats, {len(rows)} messages in {time.perf_counter() - started:.0f} s", flush=True)


def make_questions(count: int, seed: int, user_id: int) -> list[str]:
    """1–4 of the user's terms (with probability 1/3 one of its 200 commonest), and a day or a month."""
    rng = random.Random(seed)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT term, sum(df) FROM memory_search_term WHERE user_id = %s AND df > 0 GROUP BY term", [user_id]
        )
        ranked = [term for term, _ in sorted(cursor.fetchall(), key=lambda row: (-row[1], row[0]))]
    common, rest = ranked[:200], ranked[200:]
    questions = []
    for index in range(count):
        words = [rng.choice(common) if rng.random() < 1 / 3 else rng.choice(rest) for _ in range(rng.randint(1, 4))]
        day = YEAR_START + timedelta(days=rng.randrange(366))
        when = f"on {day:%B} {day.day}, 2024" if index % 2 == 0 else f"in {day:%B} 2024"
        questions.append(f"What about {' '.join(words)} {when}?")
    return questions


def time_passes(label: str, run, questions: list[str]) -> None:
    for question in questions[:10]:  # warm-up: connection, stemmer cache, the chat-search threads
        run(question)
    for name in ("first pass", "second pass"):
        timings = []
        for question in questions:
            started = time.perf_counter()
            run(question)
            timings.append((time.perf_counter() - started) * 1000)
        print(
            f"{label + ', ' + name:<44} n={len(timings):<4} median {statistics.median(timings):7.1f} ms  "
            f"p95 {data_set.percentile(timings, 0.95):7.1f} ms  max {max(timings):7.1f} ms",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.rebuild or not built():
        build()
    user = get_user_model().objects.get(username=USERNAME)
    print(f"backend: {connection.vendor}; CHATS_SEARCHED = {across.CHATS_SEARCHED}", flush=True)
    questions = make_questions(args.questions, seed=7, user_id=user.pk)
    for label, dated in (("a day", questions[0::2]), ("a month", questions[1::2])):
        time_passes(
            f"{label}: choice of chats alone",
            lambda question: across.chats_chosen(
                user_id=user.pk, agent_id=None, terms=query_terms(question), spans=date_spans(question)
            ),
            dated,
        )
        with override_settings(BUDDY_SEMANTIC_SEARCH="off"):
            time_passes(
                f"{label}: whole search",
                lambda question: across.search_all_chats(user=user, query=question, limit=20),
                dated,
            )


if __name__ == "__main__":
    main()
