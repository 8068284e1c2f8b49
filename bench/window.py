"""Benchmark: building the window (query + walk + decoding) for sessions of 1K, 100K and 1M messages,
on SQLite and on PostgreSQL.

    .venv/bin/python bench/window.py    # both backends, all sizes; writes docs/bench-window.md
    .venv/bin/python bench/window.py --backend sqlite --sizes 1000,100000 --repeat 100 --no-write

The data is built once and reused: SQLite in var/bench/window.sqlite3 (bulk inserts), PostgreSQL in the
database `buddy_bench` on $BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432, COPY). Every session
ends with the same 2,000 messages, so the windows are identical and only the archive behind them
differs. Each backend runs in its own process (Django's settings are per process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
PG_SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
PG_DATABASE = "buddy_bench"
SIZES = [1_000, 100_000, 1_000_000]
COMMON_TAIL = 2_000
WORDS = [
    *("the", "a", "to", "of", "and", "canvas", "chart", "card", "window", "summary", "token", "budget"),
    *("message", "turn", "model", "tool", "result", "user", "assistant", "prompt", "cache", "memory"),
    *("search", "history", "agent", "session", "table", "media", "theme", "note", "plan", "data", "value"),
]


# --- data ---------------------------------------------------------------------------------------------


def _text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def conversation(rng: random.Random, count: int):
    """`count` messages of a realistic mix: text turns, and tool turns with one to three parallel calls
    (now and then a second round, and rarely a result far over the block cap)."""
    produced = 0
    tool_number = 0
    if count <= 0:
        return

    def emit(role, content):
        nonlocal produced
        produced += 1
        return role, content

    while True:
        yield emit("user", [{"type": "text", "text": _text(rng, 20, 400)}])
        if produced >= count:
            return
        if rng.random() < 0.3:
            for _round in range(1 if rng.random() < 0.9 else 2):
                calls = []
                if rng.random() < 0.5:
                    calls.append({"type": "text", "text": _text(rng, 20, 200)})
                for _call in range(rng.randint(1, 3)):
                    tool_number += 1
                    calls.append(
                        {
                            "type": "tool_use",
                            "id": f"toolu_{tool_number:08d}",
                            "name": rng.choice(["canvas_add_card", "canvas_show_chart", "search_history"]),
                            "input": {
                                "id": f"el{tool_number}",
                                "title": _text(rng, 5, 30),
                                "body": _text(rng, 20, 300),
                            },
                        }
                    )
                yield emit("assistant", calls)
                if produced >= count:
                    return
                results = []
                for call in calls:
                    if call["type"] != "tool_use":
                        continue
                    size = 200_000 if rng.random() < 0.002 else rng.randint(50, 2000)
                    results.append(
                        {"type": "tool_result", "tool_use_id": call["id"], "content": _text(rng, size, size)}
                    )
                yield emit("user", results)
                if produced >= count:
                    return
        yield emit("assistant", [{"type": "text", "text": _text(rng, 50, 1500)}])
        if produced >= count:
            return


def session_messages(size: int):
    """A prefix that differs by size, then the same COMMON_TAIL messages for every size."""
    head = max(size - COMMON_TAIL, 0)
    yield from conversation(random.Random(size), head)
    yield from list(conversation(random.Random(20_251_122), COMMON_TAIL))[head - size :]


def message_rows(session_id: int, size: int):
    from conversations.content import estimate_tokens, is_turn_start, largest_block_tokens

    started = datetime(2024, 1, 1, tzinfo=UTC)
    for number, (role, content) in enumerate(session_messages(size)):
        yield (
            session_id,
            role,
            json.dumps(content),
            estimate_tokens(content),
            is_turn_start(role, content),
            largest_block_tokens(content),
            started + timedelta(seconds=30 * number),
        )


# The archive only: the window reads no search document.
COLUMNS = "session_id, role, content, tokens, is_turn_start, largest_block_tokens, created_at"


def insert_sqlite(connection, session_id: int, size: int) -> None:
    batch = []
    with connection.cursor() as cursor:
        for row in message_rows(session_id, size):
            *values, created_at = row
            batch.append((*values, created_at.strftime("%Y-%m-%d %H:%M:%S.%f")))
            if len(batch) == 20_000:
                cursor.executemany(f"INSERT INTO conversations_message ({COLUMNS}) VALUES (?,?,?,?,?,?,?)", batch)
                batch = []
        if batch:
            cursor.executemany(f"INSERT INTO conversations_message ({COLUMNS}) VALUES (?,?,?,?,?,?,?)", batch)


def insert_postgres(connection, session_id: int, size: int) -> None:
    raw = connection.connection
    with raw.cursor() as cursor, cursor.copy(f"COPY conversations_message ({COLUMNS}) FROM STDIN") as copy:
        for row in message_rows(session_id, size):
            copy.write_row(row)


def ensure_data(sizes: list[int]) -> dict[int, int]:
    """Session id per size, building what is missing."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction

    from conversations.models import Agent, Message, Session

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    agent = Agent.objects.get(slug="buddy")
    sessions = {}
    for size in sizes:
        session, _ = Session.objects.get_or_create(user=user, agent=agent, chat_id=f"n{size}")
        if Message.objects.filter(session=session).count() != size:
            started = time.perf_counter()
            Message.objects.filter(session=session).delete()
            with transaction.atomic():
                if connection.vendor == "sqlite":
                    insert_sqlite(connection, session.pk, size)
                else:
                    insert_postgres(connection, session.pk, size)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE conversations_message")
            print(f"  built {size:,} messages in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        sessions[size] = session.pk
    return sessions


# --- measuring ----------------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def _timed(function) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(sizes: list[int], repeat: int) -> dict:
    """Round-robin over the sizes, so that the load of a shared machine falls on every size alike."""
    from django.conf import settings
    from django.db import connection

    from conversations.models import Session
    from conversations.window import window_build
    from conversations.window.selectors import session_messages_since, window_rows_query

    session_ids = ensure_data(sizes)
    sessions = {size: Session.objects.get(pk=session_ids[size]) for size in sizes}
    samples: dict[int, dict[str, list[float]]] = {
        size: {"step": [], "step_cpu": [], "build": [], "build_cpu": [], "query": []} for size in sizes
    }

    def build(session: Session, *, moves: bool) -> None:
        window = window_build(session=session)
        assert window.moved is moves and window.mode == ("step" if moves else "stored")

    for _ in range(max(repeat // 4, 5)):
        for size in sizes:
            # A step: from a stored start of 0 the build looks up the first turn start, walks, and stores
            # the new start with the conditional UPDATE (what happens once per step).
            Session.objects.filter(pk=sessions[size].pk).update(window_start_id=0)
            wall, cpu = _timed(lambda session=sessions[size]: build(session, moves=True))
            samples[size]["step"].append(wall)
            samples[size]["step_cpu"].append(cpu)
    windows = {size: window_build(session=sessions[size]) for size in sizes}
    for _ in range(repeat):
        for size in sizes:
            wall, cpu = _timed(lambda session=sessions[size]: build(session, moves=False))
            samples[size]["build"].append(wall)
            samples[size]["build_cpu"].append(cpu)
            limit = settings.BUDDY_WINDOW_ROWS + 1
            query = window_rows_query(session_id=sessions[size].pk, stored_start=windows[size].start_id, limit=limit)
            samples[size]["query"].append(_timed(lambda query=query: list(query.all()))[0])
    results = {"backend": connection.vendor, "sizes": {}}
    for size in sizes:
        figures = samples[size]
        plan = window_rows_query(session_id=sessions[size].pk, stored_start=windows[size].start_id, limit=201)
        results["sizes"][str(size)] = {
            "build_median_ms": statistics.median(figures["build"]) * 1000,
            "build_p95_ms": percentile(figures["build"], 0.95) * 1000,
            "build_cpu_median_ms": statistics.median(figures["build_cpu"]) * 1000,
            "query_median_ms": statistics.median(figures["query"]) * 1000,
            "step_median_ms": statistics.median(figures["step"]) * 1000,
            "step_p95_ms": percentile(figures["step"], 0.95) * 1000,
            "window_messages": len(windows[size].messages),
            "window_tokens": windows[size].tokens,
            "plan": plan.explain(),
            "lookup_plan": session_messages_since(session_id=sessions[size].pk, since=0)
            .filter(is_turn_start=True)
            .order_by("session_id", "id")
            .values_list("id", flat=True)[:1]
            .explain(),
        }
        print(
            f"  {connection.vendor} {size:>9,}: {statistics.median(figures['build']) * 1000:.2f} ms",
            file=sys.stderr,
        )
    return results


def child(backend: str, sizes: list[int], repeat: int) -> None:
    os.environ["DJANGO_DEBUG"] = "0"  # no query log growing in memory
    os.environ.pop("BUDDY_VAR_DIR", None)
    if backend == "sqlite":
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{BENCH_DIR / 'window.sqlite3'}"
    else:
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [PG_DATABASE]).fetchone()
            if not exists:
                connection.execute(f"CREATE DATABASE {PG_DATABASE}")
        os.environ["DATABASE_URL"] = f"{PG_SERVER}/{PG_DATABASE}"
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
    import django

    django.setup()
    print(json.dumps(measure(sizes, repeat)))


# --- report -------------------------------------------------------------------------------------------


NOTES = """\
Notes:

- Targets: median ≤ 5 ms at 1M messages on SQLite and a 1M/1K ratio ≤ 1.5. The range query is one
  `SEARCH … USING INDEX message_session_id (session_id=? AND id>?)`, so its cost does not depend on the
  archive's size; most of a build is Python (the walk and the JSON decoding of the rows in the window,
  then the ORM) and the read of the stored start.
- PostgreSQL matches the session with `session_id = ANY(ARRAY[X])`, which the planner does not fold out
  of the ORDER BY (`conversations.window.selectors.session_messages_since` says why): the first-turn-start
  lookup is an index-only scan of the partial turn-start index, and every plan of the range query is
  bounded — the (session, id) index with both bounds, a primary-key *range* `id >= S` plus a sort when
  PostgreSQL knows few rows of any session are that new, or, for a small session, the single-column
  foreign-key index plus a sort.
- *Step* includes the conditional UPDATE and its commit, hence the wider spread; a step happens once per
  (1 − low-water) × budget tokens of conversation.
- The sizes are measured round-robin so that they share the machine's load alike, and the client CPU
  time is given as a figure the load hardly moves (on PostgreSQL it leaves out the server's share)."""


def report(results: list[dict], command: str) -> str:
    lines = [
        "# Benchmark: building the window",
        "",
        "Time of `window_build(session=...)` — the stored start read, the one range query of the",
        "newest `BUDDY_WINDOW_ROWS + 1` messages, the walk and the JSON decoding of the rows in the window —",
        "for a session holding 1K, 100K and 1M archived messages (default settings: 120,000-token budget,",
        "200 rows). Every session ends with the same 2,000 messages (text turns and tool turns), so the",
        "windows are identical and only the archive behind them grows. Warm cache, one process, a small",
        "shared 2-core VM. The data is built once and reused: SQLite by bulk inserts (1.1M rows in about",
        "4 minutes, a 2.3 GB file), PostgreSQL by COPY (about 2.5 minutes).",
        "",
        "*Steady* is a call where the start stays (every model call between steps); *step* is a call that",
        "moves the start (the stored start reset to 0 first: it also looks up the first turn start and",
        "stores the new start with the conditional UPDATE).",
        "",
        f"Command: `{command}`",
        "",
        "| backend | messages | steady median | steady p95 | steady client CPU (median) "
        "| query alone (median) | step median | step p95 | window |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for result in results:
        for size, figures in result["sizes"].items():
            lines.append(
                f"| {result['backend']} | {int(size):,} | {figures['build_median_ms']:.2f} ms | "
                f"{figures['build_p95_ms']:.2f} ms | {figures['build_cpu_median_ms']:.2f} ms | "
                f"{figures['query_median_ms']:.2f} ms | "
                f"{figures['step_median_ms']:.2f} ms | {figures['step_p95_ms']:.2f} ms | "
                f"{figures['window_messages']} msgs, {figures['window_tokens']:,} tokens |"
            )
    lines += ["", "Ratio of the steady median at the largest size to the smallest:", ""]
    for result in results:
        sizes = sorted(result["sizes"], key=int)
        if len(sizes) > 1:
            ratio = result["sizes"][sizes[-1]]["build_median_ms"] / result["sizes"][sizes[0]]["build_median_ms"]
            lines.append(f"- {result['backend']}: {int(sizes[-1]):,} / {int(sizes[0]):,} = **{ratio:.2f}**")
    lines += ["", *NOTES.splitlines()]
    lines += ["", "Query plans: the range query (steady state) and the first-turn-start lookup (a step from 0):", ""]
    for result in results:
        for size, figures in sorted(result["sizes"].items(), key=lambda item: int(item[0])):
            lines += [f"{result['backend']}, {int(size):,} messages:", "```", figures["plan"].strip()]
            lines += ["--", figures["lookup_plan"].strip(), "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES))
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/bench-window.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.child:
        child(args.child, sizes, args.repeat)
        return
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    results = []
    for backend in backends:
        output = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                backend,
                "--sizes",
                args.sizes,
                "--repeat",
                str(args.repeat),
            ],
            check=True,
            capture_output=False,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
    command = " ".join([".venv/bin/python", "bench/window.py", *sys.argv[1:]])
    text = report(results, command)
    print(text)
    if not args.no_write:
        (ROOT / "docs").mkdir(exist_ok=True)
        (ROOT / "docs" / "bench-window.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
