"""Time of `GET /memory/stats` for a chat of 1M messages and for chats of 1K, on bench/search.py's data
set (built there, reused here).

    .venv/bin/python bench/stats.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_search .venv/bin/python bench/stats.py

agent.stats.memory_stats end to end, on one database connection, after a warm-up; the median and p95
of REPEATS calls for one chat of each size (the first two sessions of the data set), and their ratio.
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

from agent.stats import memory_stats  # noqa: E402
from conversations.models import Session  # noqa: E402

REPEATS = 200


def timed(session: Session) -> list[float]:
    for _ in range(10):
        memory_stats(session=session)
    timings = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        memory_stats(session=session)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    call_command("migrate", verbosity=0)
    big = Session.objects.filter(pk=1).first()
    small = Session.objects.filter(pk=2).first()
    if big is None or small is None:
        sys.exit("no data set: run bench/search.py first")
    results = {}
    for session in (big, small):
        label = f"a chat of {memory_stats(session=session)['total_messages']:,} messages"
        timings = sorted(timed(session))
        results[label] = statistics.median(timings)
        p95 = timings[int(0.95 * len(timings)) - 1]
        print(f"{connection.vendor}, {label:<28} median {results[label]:6.2f} ms  p95 {p95:6.2f} ms", flush=True)
    first, second = results.values()
    print(f"ratio: {first / second:.2f}")


if __name__ == "__main__":
    main()
