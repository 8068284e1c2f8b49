"""A prompt-frame flood on one socket against another user's turns (docs/security.md, "Floods").

One daphne process (`python -m buddy.server`, the server `make run` starts) with the offline model and
the default limits. User A's socket sends FRAMES `prompt` frames in about SECONDS seconds and reads its
refusals; meanwhile other users (NEIGHBOURS of them, taking turns so that none reaches the prompt
limit) run turns one after the other, each over a socket of their own, for DURATION seconds.
Reported: the neighbours' turn latency (prompt sent → `assistant_message`) before and during the
flood, how many flood frames were answered by then and how, and daphne's resident memory before, at
its peak and after.

    .venv/bin/python bench/flood.py                        # SQLite file under var/bench/, in-memory layer
    .venv/bin/python bench/flood.py --postgres --redis     # PostgreSQL (database recreated) and Redis
    .venv/bin/python bench/flood.py --frames 30000 --seconds 0.4 --duration 20

Every wait is bounded; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
CHAT = "agent=buddy&chat_id=main"
TURN_EVERY = 0.5  # seconds from one neighbour's turn to the next one's: 6 neighbours stay under 20 a minute

sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from bench._django import fresh_database  # noqa: E402


def database_prepare(postgres: bool) -> str:
    """A fresh database with two users; returns its URL."""
    return fresh_database("flood", postgres=postgres, server=PG_SERVER)


def cookies(database_url: str, neighbours: int) -> list[str]:
    """Session cookies of the flooder, then of each neighbour."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from conversations.services import agent_ensure_default

    call_command("migrate", verbosity=0)
    agent_ensure_default()
    values = []
    for name in ["flooder", *(f"neighbour{index}" for index in range(neighbours))]:
        user, _ = get_user_model().objects.get_or_create(username=name)
        client = Client()
        client.force_login(user)
        values.append(client.cookies[settings.SESSION_COOKIE_NAME].value)
    return values


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class PeakRss:
    """Samples a process's resident memory every 20 ms on a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.done = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, rss_mib(self.pid))

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def open_socket(port: int, cookie: str):

    return connect(
        f"ws://127.0.0.1:{port}/ws/?{CHAT}",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=f"http://127.0.0.1:{port}",
        compression=None,
        open_timeout=30,
        max_queue=None,
        max_size=None,
    )


async def drain_replay(ws) -> None:
    """Read the connect replay (up to a quiet moment)."""
    while True:
        try:
            await asyncio.wait_for(ws.recv(), 0.5)
        except TimeoutError:
            return


async def one_turn(ws, text: str) -> float:
    started = time.perf_counter()
    await ws.send(json.dumps({"type": "prompt", "text": text}))
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 120))
        if frame["type"] == "assistant_message":
            return (time.perf_counter() - started) * 1000
        if frame["type"] == "error":
            raise SystemExit(f"the neighbour's turn was refused: {frame}")


async def flood(ws, frames: int, seconds: float, codes: Counter) -> tuple[float, asyncio.Task]:
    """Send `frames` prompts in about `seconds`, counting the answers in `codes` (until cancelled);
    returns the seconds spent sending and the reading task."""
    started = time.perf_counter()

    async def read() -> None:
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == "error":
                codes[frame["code"]] += 1
            elif frame["type"] == "user_message":
                codes["ran"] += 1

    reader = asyncio.create_task(read())
    batch = max(1, frames // 100)
    for index in range(0, frames, batch):
        for offset in range(index, min(frames, index + batch)):
            await ws.send(json.dumps({"type": "prompt", "text": f"flood {offset}"}))
        await asyncio.sleep(max(0.0, started + seconds * (index + batch) / frames - time.perf_counter()))
    sent = time.perf_counter() - started
    await asyncio.sleep(0)
    return sent, reader


async def run(port: int, pid: int, cookies: list[str], args: argparse.Namespace) -> dict:
    sockets = [await open_socket(port, cookie) for cookie in cookies]
    try:
        flood_ws, neighbours = sockets[0], sockets[1:]
        for ws in sockets:
            await drain_replay(ws)
        for ws in neighbours:
            await one_turn(ws, "warm up")
        before = []
        for index in range(10):
            started = time.perf_counter()
            before.append(await one_turn(neighbours[index % len(neighbours)], f"before {index}"))
            await asyncio.sleep(max(0.0, started + TURN_EVERY - time.perf_counter()))
        rss_before = rss_mib(pid)
        during: list[float] = []
        codes: Counter = Counter()
        with PeakRss(pid) as peak:
            sent, reader = await flood(flood_ws, args.frames, args.seconds, codes)
            until = time.perf_counter() + args.duration
            while time.perf_counter() < until:
                started = time.perf_counter()
                during.append(await one_turn(neighbours[len(during) % len(neighbours)], f"during {len(during)}"))
                # Paced so that no neighbour reaches the prompt limit.
                await asyncio.sleep(max(0.0, started + TURN_EVERY - time.perf_counter()))
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await reader
        answered = dict(codes)
        await flood_ws.close()
        await asyncio.sleep(1)
        return {
            "before_ms": before,
            "during_ms": during,
            "sent_s": sent,
            "codes": answered,
            "rss_before": rss_before,
            "rss_peak": peak.peak,
            "rss_after": rss_mib(pid),
        }
    finally:
        for ws in sockets:
            await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--duration", type=float, default=20, help="seconds of neighbours' turns during the flood")
    parser.add_argument("--neighbours", type=int, default=6)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--redis", action="store_true")
    args = parser.parse_args()

    from devtools.servers import buddy_server_start, buddy_server_stop, free_port, wait_until_up

    database_url = database_prepare(args.postgres)
    user_cookies = cookies(database_url, args.neighbours)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "buddy.settings",
        "DATABASE_URL": database_url,
        "BUDDY_LLM": "offline",
        "BUDDY_SUMMARIES": "off",
        "BUDDY_SEMANTIC_SEARCH": "off",
        "BUDDY_LOG_LEVEL": "WARNING",
        "BUDDY_CHANNEL_PREFIX": f"buddy-flood-{uuid.uuid4().hex[:8]}",
    }
    env.pop("REDIS_URL", None)
    if args.redis:
        env["REDIS_URL"] = REDIS_URL
    port = free_port()
    log = BENCH_DIR / "flood-daphne.log"
    with log.open("wb") as output:
        server = buddy_server_start(port, env, output)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", server, log_path=log)
        result = asyncio.run(run(port, server.pid, user_cookies, args))
    finally:
        buddy_server_stop(server)

    def summary(values: list[float]) -> str:
        if not values:
            return "none"
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        return (
            f"median {statistics.median(values):.0f} ms, p95 {p95:.0f} ms, max {max(values):.0f} ms (n={len(values)})"
        )

    machine = f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}, Python {platform.python_version()}")
    database, layer = "PostgreSQL" if args.postgres else "SQLite", "Redis" if args.redis else "memory"
    print(f"database: {database}; channel layer: {layer}")
    answered = sum(result["codes"].values())
    print(f"flood: {args.frames} prompt frames sent in {result['sent_s']:.2f} s")
    print(f"flood frames answered within {args.duration:.0f} s: {answered} {result['codes']}")
    print(f"neighbours' turn before the flood: {summary(result['before_ms'])}")
    print(f"neighbours' turn during the flood: {summary(result['during_ms'])}")
    delay = (
        statistics.median(result["during_ms"]) - statistics.median(result["before_ms"])
        if result["during_ms"] and result["before_ms"]
        else float("nan")
    )
    print(f"added by the flood (median): {delay:.0f} ms")
    print(
        f"daphne RSS: {result['rss_before']:.0f} MiB before, {result['rss_peak']:.0f} MiB peak, "
        f"{result['rss_after']:.0f} MiB after"
    )


if __name__ == "__main__":
    main()
