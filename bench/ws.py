"""WebSocket benchmark: N authenticated sockets on one daphne process (loopback only).

Each socket connects (at a steady rate) to one chat whose canvas holds 50 elements and receives the
replay; then a driver socket answers confirmations on that canvas, and every answer is broadcast to
all N sockets. Reported: connect+replay latency (TCP connect → last replay frame) and broadcast
fan-out latency (driver sends the answer → each socket has the frame), for the in-memory and the
Redis channel layers.

    .venv/bin/python bench/ws.py                       # N = 100 and 1000, memory and redis layers
    .venv/bin/python bench/ws.py --sizes 100 --layers memory --broadcasts 5
    .venv/bin/python bench/ws.py --layers memory-stock,redis-stock,redis-pubsub   # other layers
    .venv/bin/python bench/ws.py --layer-only          # one broadcast through the in-memory layers alone

The database is a SQLite file under var/bench/ (built once, reused); Redis at $REDIS_URL or
redis://127.0.0.1:6379/0. Every run is bounded: connection and receive timeouts, a fixed number of
broadcasts, and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
DATABASE_URL = f"sqlite:///{BENCH_DIR / 'ws.sqlite3'}"
CHAT_ID = "bench"
ELEMENTS = 50
CONFIRMATIONS = 20  # of the 50 elements: each broadcast answers one

sys.path.insert(0, str(ROOT))
os.environ["DATABASE_URL"] = DATABASE_URL
os.environ.pop("REDIS_URL", None)  # this process only prepares the database
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")

from devtools.servers import buddy_server_start, buddy_server_stop, free_port  # noqa: E402


def setup_database() -> str:
    """Migrate, make the user, the chat and its 50-element canvas; return a session cookie value."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from canvas.services import canvas_apply
    from conversations.services import session_get_or_create

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"first_name": "Bench"})
    session = session_get_or_create(user=user, agent_slug=None, chat_id=CHAT_ID)
    canvas_apply(session=session, command="canvas_set_mode", params={"mode": "clear"})
    canvas_apply(session=session, command="canvas_set_theme", params={"theme": ""})
    for index in range(ELEMENTS - CONFIRMATIONS):
        if index % 3 == 0:
            params = {
                "id": f"chart{index}",
                "title": f"Chart {index}",
                "chart_type": "line",
                "labels": [f"d{day}" for day in range(12)],
                "series": [{"name": "s", "values": list(range(12))}],
            }
            canvas_apply(session=session, command="canvas_show_chart", params=params)
        else:
            params = {"id": f"card{index}", "title": f"Card {index}", "body": "Lorem ipsum dolor sit amet. " * 8}
            canvas_apply(session=session, command="canvas_add_card", params=params)
    for index in range(CONFIRMATIONS):
        params = {"id": f"ask{index}", "title": f"Question {index}", "message": "Go ahead?"}
        canvas_apply(session=session, command="canvas_show_confirmation", params=params)
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def raise_file_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))  # inherited by the server
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start_server(layer: str, port: int, log: Path, priority: int = 0) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": DATABASE_URL, "DJANGO_DEBUG": "0", "BUDDY_LOG_LEVEL": "WARNING"}
    env["BUDDY_CHANNEL_PREFIX"] = f"buddy-bench-{uuid.uuid4().hex[:8]}"
    env.pop("REDIS_URL", None)
    if layer.startswith("redis"):
        env["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    # For comparison, layers other than the settings' own: a settings module that overrides them.
    override = {
        "memory-stock": '{"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}',
        "redis-stock": '{"default": {**CHANNEL_LAYERS["default"], "BACKEND": "channels_redis.core.RedisChannelLayer"}}',
        "redis-pubsub": '{"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {'
        '"hosts": [REDIS_URL], "prefix": CHANNEL_LAYER_PREFIX}}}',
    }.get(layer)
    if override:
        module = f"ws_settings_{layer.replace('-', '_')}"
        (BENCH_DIR / f"{module}.py").write_text(
            f"from buddy.settings import *  # noqa: F403\nCHANNEL_LAYERS = {override}  # noqa: F405\n"
        )
        env["PYTHONPATH"] = str(BENCH_DIR)
        env["DJANGO_SETTINGS_MODULE"] = module
    with log.open("wb") as output:
        # On a machine shared with other jobs, a higher priority approximates a server of its own.
        process = buddy_server_start(port, env, output, preexec_fn=(lambda: os.nice(priority)) if priority else None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"daphne exited:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("daphne did not start listening within 60 s")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


@dataclass
class Client:
    replay_ms: float | None = None
    error: str | None = None


@dataclass
class Arrivals:
    """Arrival times of broadcast frames, by canvas version; `complete` is set when all have one."""

    expected: int = 0
    times: dict[int, list[float]] = field(default_factory=dict)
    complete: dict[int, asyncio.Event] = field(default_factory=dict)

    def watch(self, version: int) -> asyncio.Event:
        self.times.setdefault(version, [])
        return self.complete.setdefault(version, asyncio.Event())

    def add(self, version: int, arrived: float) -> None:
        times = self.times.setdefault(version, [])
        times.append(arrived)
        if len(times) == self.expected and version in self.complete:
            self.complete[version].set()


def open_socket(url: str, cookie: str):
    from urllib.parse import urlsplit

    from websockets.asyncio.client import connect

    # The page's own origin: scheme, host and port must match (buddy/origins.py).
    return connect(
        url,
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=f"http://{urlsplit(url).netloc}",
        compression=None,
        open_timeout=60,
        max_queue=None,
    )


async def run_client(url: str, cookie: str, client: Client, ready: asyncio.Event, arrivals: Arrivals) -> None:
    started = time.perf_counter()
    try:
        async with open_socket(url, cookie) as ws:
            replayed = 0
            while replayed < 1 + ELEMENTS:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if frame.get("type") == "canvas_command":
                    replayed += 1
            client.replay_ms = (time.perf_counter() - started) * 1000
            ready.set()
            async for raw in ws:  # until cancelled
                arrived = time.perf_counter()
                frame = json.loads(raw)
                if frame.get("type") == "canvas_command" and frame["command"] == "canvas_update_card":
                    arrivals.add(frame["version"], arrived)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # noqa: BLE001  (counted and reported)
        client.error = repr(error)
        ready.set()


async def run_size(port: int, server_pid: int, cookie: str, sockets: int, rate: float, broadcasts: int) -> dict:
    url = f"ws://127.0.0.1:{port}/ws/?chat_id={CHAT_ID}"
    clients = [Client() for _ in range(sockets)]
    readies = [asyncio.Event() for _ in range(sockets)]
    arrivals = Arrivals()
    tasks = []
    opened_at = time.perf_counter()
    for index, (client, ready) in enumerate(zip(clients, readies, strict=True)):
        # A steady rate: the index-th socket opens at index / rate seconds.
        delay = opened_at + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(run_client(url, cookie, client, ready, arrivals)))
    await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 180)
    connected = [client for client in clients if client.replay_ms is not None]
    errors = [client.error for client in clients if client.error]
    arrivals.expected = len(connected)
    server_rss = rss_mib(server_pid)  # with every socket open

    fanout: list[dict] = []
    async with open_socket(url, cookie) as driver:
        version = 0
        for _ in range(1 + ELEMENTS):  # the driver's own replay tells the current version
            version = json.loads(await asyncio.wait_for(driver.recv(), 30))["version"]
        await asyncio.sleep(1)
        for number in range(min(broadcasts, CONFIRMATIONS)):
            expected = version + 1 + number
            complete = arrivals.watch(expected)
            sent = time.perf_counter()
            await driver.send(json.dumps({"type": "confirmation_response", "id": f"ask{number}", "confirmed": True}))
            with contextlib.suppress(TimeoutError):  # counted: "received" falls short
                await asyncio.wait_for(complete.wait(), 30)
            latencies = [(arrived - sent) * 1000 for arrived in arrivals.times[expected]]
            fanout.append(
                {
                    "received": len(latencies),
                    "first": min(latencies),
                    "p50": percentile(latencies, 0.5),
                    "p95": percentile(latencies, 0.95),
                    "max": max(latencies),
                }
            )
            await asyncio.sleep(0.3)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    replay = [client.replay_ms for client in connected]
    return {
        "sockets": sockets,
        "rate": rate,
        "connected": len(connected),
        "errors": errors[:3],
        "error_count": len(errors),
        "replay_p50": percentile(replay, 0.5),
        "replay_p95": percentile(replay, 0.95),
        "replay_max": max(replay),
        # first: the change's own cost (the confirmation is written, committed, pushed); the rest of
        # the spread is the fan-out to every socket.
        "fanout_first": statistics.median(item["first"] for item in fanout),
        "fanout_p50": statistics.median(item["p50"] for item in fanout),
        "fanout_p95": statistics.median(item["p95"] for item in fanout),
        "fanout_max": statistics.median(item["max"] for item in fanout),
        "fanout_all_received": all(item["received"] == len(connected) for item in fanout),
        "broadcasts": len(fanout),
        "server_rss_mib": round(server_rss, 1),
        "load_average": os.getloadavg()[0],
    }


async def layer_broadcast_ms(layer_class: type, members: int) -> float:
    """Median time of one group_send to `members` channels until every one has received it."""
    layer = layer_class()
    channels = [await layer.new_channel() for _ in range(members)]
    for index, channel in enumerate(channels):
        await layer.group_add("chat.1.1.bench", channel)
        await layer.group_add(f"user.{index}", channel)  # each socket is in two groups, as in Buddy
    times = []
    for version in range(7):
        started = time.perf_counter()
        await layer.group_send("chat.1.1.bench", {"type": "frame", "frame": {"version": version}})
        await asyncio.gather(*(layer.receive(channel) for channel in channels))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def layer_only(sizes: list[int]) -> None:
    """The in-memory layers alone, in this process: no server, no sockets."""
    import django

    django.setup()
    from channels.layers import InMemoryChannelLayer as StockLayer

    from realtime.layers import InMemoryChannelLayer

    print("| members | channels' InMemoryChannelLayer | realtime.layers.InMemoryChannelLayer |")
    print("| --- | --- | --- |")
    for size in sizes:
        stock = asyncio.run(layer_broadcast_ms(StockLayer, size))
        ours = asyncio.run(layer_broadcast_ms(InMemoryChannelLayer, size))
        print(f"| {size} | {stock:.1f} ms | {ours:.1f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--layers", default="memory,redis")
    parser.add_argument("--rate", type=float, default=200.0, help="new sockets per second")
    parser.add_argument("--broadcasts", type=int, default=10)
    parser.add_argument("--output", default=str(BENCH_DIR / "ws-results.json"))
    parser.add_argument(
        "--server-nice", type=int, default=0, help="nice increment of the server (negative: higher priority; root)"
    )
    parser.add_argument("--layer-only", action="store_true", help="time the in-memory layers' broadcast alone")
    args = parser.parse_args()
    if args.layer_only:
        layer_only([int(value) for value in args.sizes.split(",")])
        return

    limit = raise_file_limit()
    print(f"open-file limit {limit}; preparing {DATABASE_URL}", flush=True)
    results = []
    for layer in args.layers.split(","):
        for size in (int(value) for value in args.sizes.split(",")):
            if size + 50 > limit:
                raise SystemExit(f"{size} sockets need a higher open-file limit than {limit}")
            cookie = setup_database()  # a fresh canvas: every confirmation unanswered
            port = free_port()
            server = start_server(layer, port, BENCH_DIR / f"daphne-{layer}-{size}.log", args.server_nice)
            try:
                result = asyncio.run(run_size(port, server.pid, cookie, size, args.rate, args.broadcasts))
            finally:
                buddy_server_stop(server, timeout=15)
            result["layer"] = layer
            result["server_nice"] = args.server_nice
            results.append(result)
            print(json.dumps(result), flush=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    print(
        "\n| layer | sockets | opened at | connected | connect+replay p50 / p95 / max (ms) "
        "| broadcast first / p50 / p95 / last socket (ms) | server RSS | load avg |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['layer']} | {r['sockets']} | {r['rate']:g}/s | {r['connected']} | "
            f"{r['replay_p50']:.1f} / {r['replay_p95']:.1f} / {r['replay_max']:.1f} | "
            f"{r['fanout_first']:.1f} / {r['fanout_p50']:.1f} / {r['fanout_p95']:.1f} / {r['fanout_max']:.1f} | "
            f"{r['server_rss_mib']} MiB | {r['load_average']:.1f} |"
        )


if __name__ == "__main__":
    main()
