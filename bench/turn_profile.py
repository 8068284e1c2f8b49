"""Where a turn's CPU goes: plain turns run one after another through the ASGI application in this
process (`POST /prompt`, or a WebSocket `prompt` until its `assistant_message`), the fake Messages API
(devtools/fake_anthropic.py) answering at once from a process of its own, so none of its CPU is counted.

Prints the process's CPU per turn. With `--profile`, every thread that runs the turn's code (the event
loop, the turn's thread, Django's request threads) is profiled on its own CPU clock and the top
functions by cumulative CPU are printed, as milliseconds per turn; the profiler itself slows Python
code several times over, so read the shares, not the milliseconds. `--clock wall` profiles the
threads (not the loop) on the wall clock instead: where a turn waits, on the database and the network
included (an HTTP request's thread waiting for its turn thread counts that wait too: read the turn's
functions, not the totals).

    .venv/bin/python bench/turn_profile.py [--transport ws|http] [--turns 200] [--postgres]
        [--profile [--clock cpu|wall] [--top 40] [--save PATH]]

SQLite (var/bench/turn_profile.sqlite3, the in-memory channel layer) by default; `--postgres`: the
database `buddy_bench_turn_profile` (psycopg's pool) with Redis. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import ROOT, fresh_database, setup  # noqa: E402
from bench.soak import PG_SERVER, REDIS_URL, users_create  # noqa: E402

WARM_UP = 10
FAKE = (
    "import sys, time; sys.path.insert(0, {root!r}); from devtools.fake_anthropic import FakeAnthropic; "
    "fake = FakeAnthropic().start(); print(fake.base_url, flush=True); time.sleep(1e9)"
)


class ThreadProfiles:
    """A CPU-clock profile per thread that runs sync code for the application (asgiref's thread
    handler), plus the event loop's own, while `on`."""

    def __init__(self, clock: str = "cpu") -> None:
        from asgiref.sync import SyncToAsync

        self.on = False
        self.wall = clock == "wall"
        timer = time.perf_counter if self.wall else time.thread_time
        self.loop = cProfile.Profile(timer)
        self.threads: dict[int, cProfile.Profile] = {}
        handler = SyncToAsync.thread_handler
        profiles = self
        active = threading.local()

        def profiled(function):
            def run(*args, **kwargs):
                if not profiles.on or getattr(active, "on", False):
                    return function(*args, **kwargs)
                profile = profiles.threads.setdefault(threading.get_ident(), cProfile.Profile(timer))
                active.on = True
                profile.enable()
                try:
                    return function(*args, **kwargs)
                finally:
                    profile.disable()
                    active.on = False

            return run

        def thread_handler(self_, *args, **kwargs):
            return profiled(handler)(self_, *args, **kwargs)

        SyncToAsync.thread_handler = thread_handler
        # An HTTP turn's thread is no asgiref thread: its request's thread submits it (agent/threads.py).
        import agent.threads  # Django is set up by now

        agent.threads._closing = profiled(agent.threads._closing)

    def start(self) -> None:
        self.on = True
        self.loop.enable()

    def stop(self) -> None:
        self.loop.disable()
        self.on = False

    def stats(self) -> pstats.Stats:
        # On the wall clock the loop's profile would count its waits for events: the threads' only.
        profiles = list(self.threads.values()) if self.wall else [self.loop, *self.threads.values()]
        stats = pstats.Stats()
        for profile in profiles:
            profile.create_stats()
            if profile.stats:
                stats.add(profile)
        return stats


def print_top(stats: pstats.Stats, turns: int, count: int = 40) -> None:
    rows = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)  # type: ignore[attr-defined]
    print(f"{'cumulative ms/turn':>18} {'own ms/turn':>12}  function")
    for (path, line, name), (_calls, _primitive, own, cumulative, _callers) in rows[:count]:
        where = path.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
        print(f"{1000 * cumulative / turns:18.2f} {1000 * own / turns:12.2f}  {where}:{line}({name})")


async def run(args: argparse.Namespace, user, profiles: ThreadProfiles | None) -> float:
    from channels.testing import HttpCommunicator, WebsocketCommunicator
    from django.conf import settings

    from buddy.asgi import application

    async def http_turn(n: int) -> None:
        body = json.dumps({"text": f"turn {n}", "chat_id": "profile-http"}).encode()
        headers = [
            (b"authorization", f"Bearer {user.token}".encode()),
            (b"content-type", b"application/json"),
            (b"host", b"127.0.0.1"),
        ]
        response = await HttpCommunicator(application, "POST", "/prompt", body=body, headers=headers).get_response(60)
        if response["status"] != 200:
            raise RuntimeError(f"POST /prompt answered {response['status']}: {response['body'][:300]!r}")

    socket = None
    if args.transport == "ws":
        socket = WebsocketCommunicator(
            application,
            "/ws/?agent=buddy&chat_id=profile-ws",
            headers=[
                (b"cookie", f"{settings.SESSION_COOKIE_NAME}={user.cookie}".encode()),
                (b"origin", b"http://127.0.0.1"),
                (b"host", b"127.0.0.1"),
            ],
        )
        connected, _ = await socket.connect(timeout=30)
        if not connected:
            raise RuntimeError("the socket was refused")
        while not await socket.receive_nothing(0.3):  # the connect replay
            await socket.receive_from()

    async def ws_turn(n: int) -> None:
        await socket.send_to(text_data=json.dumps({"type": "prompt", "text": f"turn {n}"}))
        while True:
            frame = json.loads(await socket.receive_from(timeout=60))
            if frame["type"] == "assistant_message":
                return
            if frame["type"] == "error":
                raise RuntimeError(f"turn refused: {frame}")

    turn = ws_turn if args.transport == "ws" else http_turn
    for n in range(WARM_UP):
        await turn(n)
    if profiles is not None:
        profiles.start()
    started = time.process_time()
    for n in range(args.turns):
        await turn(WARM_UP + n)
    cpu = time.process_time() - started
    if profiles is not None:
        profiles.stop()
    if socket is not None:
        await socket.disconnect()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("ws", "http"), default="ws")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL and Redis instead of SQLite")
    parser.add_argument("--profile", action="store_true", help="print the top functions by cumulative CPU")
    parser.add_argument("--top", type=int, default=40, help="how many functions --profile prints")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="wall: the threads' elapsed time, waits on the database and the network included (no event loop)",
    )
    parser.add_argument("--save", metavar="PATH", help="also write the profile to PATH (pstats), with --profile")
    args = parser.parse_args()
    if (args.save or args.clock != "cpu") and not args.profile:
        parser.error("--save and --clock go with --profile")

    fake = subprocess.Popen([sys.executable, "-c", FAKE.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    try:
        base_url = fake.stdout.readline().strip()
        os.environ.update(
            {
                "BUDDY_LLM": "anthropic",
                "ANTHROPIC_BASE_URL": base_url,
                "ANTHROPIC_API_KEY": "bench-key",
                "BUDDY_LLM_RETRIES": "0",
                "BUDDY_PROMPTS_PER_MINUTE": "0",
                "BUDDY_SEMANTIC_SEARCH": "off",
                "DJANGO_DEBUG": "0",
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "BUDDY_LOG_LEVEL": "WARNING",
                "BUDDY_CHANNEL_PREFIX": f"buddy-profile-{uuid.uuid4().hex[:8]}",
                "REDIS_URL": REDIS_URL if args.postgres else "",
            }
        )
        if args.postgres:
            os.environ["BUDDY_DB_POOL"] = "20"
        setup(fresh_database("turn_profile", postgres=args.postgres, server=PG_SERVER))
        user = users_create(1)[0]
        profiles = ThreadProfiles(args.clock) if args.profile else None
        cpu = asyncio.run(run(args, user, profiles))
        backend = "PostgreSQL + Redis" if args.postgres else "SQLite"
        print(f"{backend}, {args.transport}: {1000 * cpu / args.turns:.1f} ms of CPU per turn over {args.turns} turns")
        if profiles is not None:
            stats = profiles.stats()
            print_top(stats, args.turns, args.top)
            if args.save:
                stats.dump_stats(args.save)
    finally:
        fake.kill()
        fake.wait()


if __name__ == "__main__":
    main()
