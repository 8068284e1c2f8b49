"""Time of `GET /memory/stats` for a chat of 1M messages and for chats of 1K, on bench/search.py's data
set (built there, reused here).

    .venv/bin/python bench/stats.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_search .venv/bin/python bench/stats.py

memory.stats.memory_stats end to end, on one database connection, after a warm-up; the median and p95
of REPEATS calls per size, and their ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench' / 'search.sqlite3'}"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from conversations.models import Session  # noqa: E402
from memory.stats import memory_stats  # noqa: E402

REPEATS = 200


def timed(sessions: list[Session]) -> list[float]:
    for session in sessions[:10]:
        memory_stats(session=session)
    timings = []
    for index in range(REPEATS):
        session = sessions[index % len(sessions)]
        started = time.perf_counter()
        memory_stats(session=session)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    call_command("migrate", verbosity=0)
    big = list(Session.objects.filter(pk=1))
    small = list(Session.objects.filter(pk__gte=2, pk__lte=1001))
    if not big or not small:
        sys.exit("no data set: run bench/search.py first")
    print(
        f"backend: {connection.vendor}; messages: {memory_stats(session=big[0])['total_messages']:,} and "
        f"{memory_stats(session=small[0])['total_messages']:,}"
    )
    results = {}
    for label, sessions in (("1 chat of 1M messages", big), ("chats of 1K messages", small)):
        timings = sorted(timed(sessions))
        results[label] = statistics.median(timings)
        print(f"{label:<24} median {results[label]:6.2f} ms  p95 {timings[int(0.95 * len(timings)) - 1]:6.2f} ms")
    ratio = results["1 chat of 1M messages"] / results["chats of 1K messages"]
    print(f"1M / 1K: {ratio:.2f}")


if __name__ == "__main__":
    main()
