"""What a turn costs the server: Buddy against the same model call made directly, and a crowd of turns.

Everything runs on loopback. The bench process starts the fake Messages API (devtools/fake_anthropic.py),
creates users in a database of its own and starts Buddy's server processes (`python -m buddy.server`, no
task worker), on SQLite with the in-memory channel layer (one process) or on PostgreSQL (psycopg's pool,
`BUDDY_DB_POOL`) with Redis (one, then two processes). The rate limit is off (`BUDDY_PROMPTS_PER_MINUTE=0`):
the load is far above what one person may send. Phases, on each backend:

1. **Overhead**: a plain prompt as `POST /prompt`, then the very request Buddy sent the model made
   directly with the SDK (`client.messages.stream`, the way agent/llm.py calls it), alternating, `--pairs`
   times; the same over the WebSocket (`prompt` → `assistant_message`). The model answers at once.
2. **First delta**: over the WebSocket, from the moment the fake writes the reply's first text to the
   socket until the client holds the first `assistant_delta` (one clock: the fake runs in this process).
3. **Queries**: one plain turn in this process (`prompt_submit`, as the server runs it), counted with
   Django's CaptureQueriesContext, with and without the rate limit's own queries.
4. **Sweep**: 1, 10 and 50 users, each sending its next prompt when the last is answered, for
   `--seconds`, over HTTP and over the WebSocket; the model takes `--model-ms` per call. Meanwhile a
   user outside the load opens a socket (its chat's canvas holds cards) and waits for the whole replay,
   and `GET /healthz` is timed, each every 0.25 s. Each step also reports the cores busy over it: the
   server processes', this process's (the load's clients and the fake model) and the whole machine's.
5. On PostgreSQL + Redis, the largest sweep step again with two server processes (users split evenly).

    .venv/bin/python bench/turn.py [--backend sqlite|postgres|both] [--pairs 200] [--seconds 15]
                                   [--model-ms 500] [--users 1,10,50] [--plot docs/bench-turn.png]
                                   [--server-cores 0.4]

`--server-cores N` caps each server process at N cores (a CPU cgroup of its own, with a CFS quota; the
bench must run as root): one process against two, each with the same fixed share of the CPU, while
PostgreSQL, Redis and the load keep the rest of a small machine. Without it the server processes share
the machine's cores with all of them. A capped process waits out its quota (in 100 ms periods), so
read a capped run for its throughput, not its latencies.

The server processes inherit this process's environment: e.g. `BUDDY_TURN_SLOTS=4 .venv/bin/python
bench/turn.py ...` measures another number of turn slots.

Results (Markdown and JSON) go to var/bench/turn/; docs/benchmarks.md holds the current table. Never part
of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import BENCH_DIR, setup  # noqa: E402
from bench.soak import REDIS_URL, Processes, database_recreate, percentile, users_create  # noqa: E402
from devtools.servers import free_port  # noqa: E402

OUT_DIR = BENCH_DIR / "turn"
PROBE_EVERY = 0.25
USER_COUNTS = (1, 10, 50)


# --- the fake model, and when it wrote each reply's first text ----------------------------------


class FirstText:
    """Patches the fake's chunk writer: the monotonic time it wrote the latest reply's first text."""

    def __init__(self) -> None:
        from devtools import fake_anthropic

        self.at: float | None = None
        handler = fake_anthropic._Handler
        write, send = handler._write_chunk, handler._send_stream
        probe = self

        def send_stream(handler_self, message, request_id):
            handler_self._first_text_written = False
            return send(handler_self, message, request_id)

        def write_chunk(handler_self, data):
            write(handler_self, data)
            if b"text_delta" in data and not getattr(handler_self, "_first_text_written", True):
                handler_self._first_text_written = True
                probe.at = time.monotonic()

        handler._send_stream, handler._write_chunk = send_stream, write_chunk


def model_with_delay(fake: Any, seconds: float) -> None:
    """Every call waits `seconds` (in the fake's own thread for the connection), then echoes."""

    def slow(body: dict[str, Any]) -> None:
        time.sleep(seconds)
        return None

    fake.responder = slow if seconds else None


def direct_call(fake_client: Any, body: dict[str, Any]) -> None:
    request = {key: value for key, value in body.items() if key != "stream"}
    with fake_client.messages.stream(**request) as stream:
        for _event in stream:
            pass
        stream.get_final_message()


# --- clients ------------------------------------------------------------------------------------


class Server:
    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def url(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"


def socket_connect(url: str, cookie: str, chat_id: str):
    from django.conf import settings
    from websockets.asyncio.client import connect

    return connect(
        f"{url.replace('http', 'ws', 1)}/ws/?agent=buddy&chat_id={chat_id}",
        origin=url,
        additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
        compression=None,
        open_timeout=60,
        max_size=2**22,
    )


async def ws_turn(socket: Any, text: str) -> tuple[float, float | None]:
    """Send a prompt; (seconds until its assistant_message, monotonic time of the first delta)."""
    started = time.monotonic()
    await socket.send(json.dumps({"type": "prompt", "text": text}))
    first_delta = None
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=120))
        kind = frame.get("type")
        if kind == "assistant_delta" and first_delta is None:
            first_delta = time.monotonic()
        elif kind == "assistant_message":
            return time.monotonic() - started, first_delta
        elif kind == "error":
            raise RuntimeError(f"turn refused: {frame}")


async def http_turn(client: Any, url: str, token: str, text: str, chat_id: str) -> float:
    started = time.monotonic()
    response = await client.post(
        f"{url}/prompt", json={"text": text, "chat_id": chat_id}, headers={"Authorization": f"Bearer {token}"}
    )
    if response.status_code != 200:
        raise RuntimeError(f"POST /prompt answered {response.status_code}: {response.text[:300]}")
    return time.monotonic() - started


async def drain_replay(socket: Any, frames: int | None, quiet: float = 0.3) -> int:
    """Read the connect replay: `frames` of them, or (None) until `quiet` seconds pass without one."""
    count = 0
    while frames is None or count < frames:
        try:
            await asyncio.wait_for(socket.recv(), timeout=quiet if frames is None else 30)
        except TimeoutError:
            break
        count += 1
    return count


# --- phases --------------------------------------------------------------------------------------


async def overhead(server: Server, fake: Any, user: Any, pairs: int) -> dict[str, Any]:
    import httpx2

    fake_client = fake.client()
    figures: dict[str, Any] = {}
    async with httpx2.AsyncClient(timeout=60) as client:
        buddy, direct = [], []
        for n in range(pairs + 5):
            took = await http_turn(client, server.url(), user.token, f"overhead {n}", "overhead-http")
            body = fake.last_request["body"]
            started = time.monotonic()
            direct_call(fake_client, body)
            if n >= 5:  # the first turns warm up the process
                buddy.append(took)
                direct.append(time.monotonic() - started)
        figures["http"] = pair_figures(buddy, direct)
    async with socket_connect(server.url(), user.cookie, "overhead-ws") as socket:
        await drain_replay(socket, None)
        buddy, direct, first_delta = [], [], []
        for n in range(pairs + 5):
            fake_text.at = None
            took, delta_at = await ws_turn(socket, f"overhead {n}")
            model_first_text = fake_text.at
            body = fake.last_request["body"]
            started = time.monotonic()
            direct_call(fake_client, body)
            if n >= 5:
                buddy.append(took)
                direct.append(time.monotonic() - started)
                if delta_at is not None and model_first_text is not None:
                    first_delta.append(delta_at - model_first_text)
        figures["ws"] = pair_figures(buddy, direct)
        figures["first_delta_ms"] = summary_ms(first_delta)
    return figures


def pair_figures(buddy: list[float], direct: list[float]) -> dict[str, Any]:
    differences = [b - d for b, d in zip(buddy, direct, strict=True)]
    return {
        "n": len(buddy),
        "buddy_ms": summary_ms(buddy),
        "direct_ms": summary_ms(direct),
        "overhead_p50_ms": round(1000 * statistics.median(differences), 1),
        "overhead_p95_ms": round(1000 * percentile(differences, 0.95), 1),
        "ratio_p50": round(statistics.median(buddy) / statistics.median(direct), 2),
    }


def summary_ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": round(1000 * statistics.median(values), 1),
        "p95": round(1000 * percentile(values, 0.95), 1),
        "p99": round(1000 * percentile(values, 0.99), 1),
    }


def queries_per_turn() -> dict[str, int]:
    """A plain turn, run here as a server process runs it (its frames to its own channel layer)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent.submit import prompt_submit
    from conversations.refs import ChatRef
    from realtime.push import sockets_served_here

    sockets_served_here()
    user = get_user_model().objects.create_user(f"queries-{uuid.uuid4().hex[:6]}", password=None)
    chat = ChatRef(agent="buddy", chat_id="queries")
    counts = {}
    for limit in (0, 20):
        settings.BUDDY_PROMPTS_PER_MINUTE = limit
        prompt_submit(user=user, text="first", chat=chat)
        with CaptureQueriesContext(connection) as queries:
            prompt_submit(user=user, text="a plain turn", chat=chat)
        counts["with_rate_limit" if limit else "turn"] = len(queries)
    return counts


class Probe:
    """Another user's socket connect + whole replay, and /healthz, every PROBE_EVERY seconds."""

    def __init__(self, server: Server, user: Any, replay_frames: int) -> None:
        self.server, self.user, self.replay_frames = server, user, replay_frames
        self.replays: list[float] = []
        self.health: list[float] = []
        self.failures: list[str] = []
        self.stop = asyncio.Event()

    async def run(self, client: Any) -> None:
        turn = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                if turn % 2 == 0:
                    async with socket_connect(self.server.url(turn // 2), self.user.cookie, "probe") as socket:
                        await drain_replay(socket, self.replay_frames)
                        self.replays.append(time.monotonic() - started)
                else:
                    response = await client.get(f"{self.server.url(turn // 2)}/healthz")
                    if response.status_code != 200:
                        raise RuntimeError(f"/healthz answered {response.status_code}")
                    self.health.append(time.monotonic() - started)
            except Exception as error:  # counted and shown with the figures
                self.failures.append(repr(error)[:200])
            turn += 1
            await asyncio.sleep(PROBE_EVERY / 2)


async def load(server: Server, users: list[Any], probe_user: Any, replay_frames: int, mode: str, seconds: float):
    """`users` prompting back to back for `seconds` (after 2 s of warm-up) over `mode`; the turns/s
    answered and the probe's latencies meanwhile."""
    import httpx2

    warm_until = time.monotonic() + 2.0
    stop_at = warm_until + seconds
    done: list[float] = []
    errors: list[str] = []
    limits = httpx2.Limits(max_connections=400, max_keepalive_connections=200)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
        probe = Probe(server, probe_user, replay_frames)

        async def one_user(index: int, user: Any) -> None:
            url = server.url(index)
            chat = f"load-{mode}-{uuid.uuid4().hex[:8]}"
            n = 0
            try:
                if mode == "http":
                    while time.monotonic() < stop_at:
                        await http_turn(client, url, user.token, f"load {n}", chat)
                        n += 1
                        if time.monotonic() >= warm_until:
                            done.append(time.monotonic())
                else:
                    async with socket_connect(url, user.cookie, chat) as socket:
                        await drain_replay(socket, None, quiet=0.2)
                        while time.monotonic() < stop_at:
                            await ws_turn(socket, f"load {n}")
                            n += 1
                            if time.monotonic() >= warm_until:
                                done.append(time.monotonic())
            except Exception as error:  # reported with the figures, not hidden
                errors.append(repr(error)[:300])

        async def probing() -> None:
            await asyncio.sleep(max(warm_until - time.monotonic(), 0))
            await probe.run(client)

        prober = asyncio.create_task(probing())
        await asyncio.gather(*(one_user(index, user) for index, user in enumerate(users)))
        probe.stop.set()
        await prober
    answered = [at for at in done if warm_until <= at <= stop_at]
    return {
        "mode": mode,
        "users": len(users),
        "processes": len(server.ports),
        "turns_per_s": round(len(answered) / seconds, 1),
        "replay_ms": summary_ms(probe.replays),
        "healthz_ms": summary_ms(probe.health),
        "probes": [len(probe.replays), len(probe.health)],
        "probe_failures": probe.failures[:5],
        "errors": errors[:5],
        "error_count": len(errors),
    }


# --- one backend ---------------------------------------------------------------------------------


def machine_cpu() -> float:
    """CPU seconds the whole machine has been busy since boot (every core; /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(value) for value in fields]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def backend_env(backend: str, fake: Any) -> dict[str, str]:
    env = {
        "BUDDY_LLM": "anthropic",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "bench-key",
        "BUDDY_LLM_RETRIES": "0",
        "BUDDY_PROMPTS_PER_MINUTE": "0",
        "BUDDY_SEMANTIC_SEARCH": "off",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": f"bench-{uuid.uuid4().hex}{uuid.uuid4().hex}",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "BUDDY_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "BUDDY_CHANNEL_PREFIX": f"buddy-turn-{uuid.uuid4().hex[:8]}",
    }
    if backend == "postgres":
        env |= {"DATABASE_URL": database_recreate("buddy_turn"), "REDIS_URL": REDIS_URL, "BUDDY_DB_POOL": "20"}
    else:
        database = OUT_DIR / "turn.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        env |= {"DATABASE_URL": f"sqlite:///{database}", "REDIS_URL": ""}
    return env


class CpuCaps:
    """A CPU cgroup of its own for each server process, capped at `cores` by a CFS quota (cgroup v1's
    `cpu` controller, or v2's `cpu.max`); removed at the end. A fixed share of the CPU per process, not a
    core of its own: a process that used up its quota waits for the next 100 ms period."""

    V1 = Path("/sys/fs/cgroup/cpu")
    V2 = Path("/sys/fs/cgroup")
    PERIOD_US = 100_000

    def __init__(self, cores: float) -> None:
        self.cores = cores
        self.groups: list[Path] = []
        if (self.V1 / "cpu.cfs_quota_us").exists():
            self.root, self.v2 = self.V1, False
        else:
            self.root, self.v2 = self.V2, True
            with contextlib.suppress(OSError):  # children get cpu.max only if the root hands the controller on
                (self.V2 / "cgroup.subtree_control").write_text("+cpu")
        try:  # a trial group, before any server starts
            self.remove_group(self.group("probe"))
        except OSError as error:
            raise SystemExit(
                f"--server-cores needs a CPU cgroup it may create and cap under {self.root} (root, and on cgroup v2 "
                f"the cpu controller enabled for children): {error}"
            ) from error

    def group(self, name: str) -> Path:
        group = self.root / f"buddy-bench-{name}-{os.getpid()}"
        group.mkdir(exist_ok=True)
        self.groups.append(group)
        quota = int(self.cores * self.PERIOD_US)
        if self.v2:
            (group / "cpu.max").write_text(f"{quota} {self.PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        return group

    def cap(self, name: str, pid: int) -> None:
        (self.group(name) / "cgroup.procs").write_text(str(pid))  # the process and all its threads

    def remove_group(self, group: Path) -> None:
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():  # a process still running goes back
                with contextlib.suppress(OSError):
                    (self.root / "cgroup.procs").write_text(pid)
        group.rmdir()
        self.groups.remove(group)

    def remove(self) -> None:
        for group in list(self.groups):
            try:
                self.remove_group(group)
            except OSError as error:
                print(f"could not remove the cgroup {group}: {error}", file=sys.stderr)


def run_backend(backend: str, args: argparse.Namespace, fake: Any) -> dict[str, Any]:
    env = backend_env(backend, fake)
    os.environ.update(env)
    setup(env["DATABASE_URL"])
    from django.db import close_old_connections

    from canvas.services import canvas_apply
    from conversations.services import session_get_or_create

    users = users_create(max(args.users) + 2)
    bench_user, probe_user, crowd = users[0], users[1], users[2:]
    from django.contrib.auth import get_user_model

    probe_session = session_get_or_create(
        user=get_user_model().objects.get(pk=probe_user.pk), agent_slug="buddy", chat_id="probe"
    )
    for n in range(3):
        canvas_apply(session=probe_session, command="canvas_add_card", params={"id": f"card{n}", "title": f"Card {n}"})
    results: dict[str, Any] = {"backend": backend}
    model_with_delay(fake, 0)
    results["queries"] = queries_per_turn()
    close_old_connections()
    processes = Processes({**os.environ, **env, "DJANGO_SETTINGS_MODULE": "buddy.settings"})
    caps = CpuCaps(args.server_cores) if args.server_cores else None

    def start_server(name: str, port: int) -> None:
        processes.start_daphne(name, port)
        if caps is not None:
            caps.cap(name, processes.running[name].pid)

    results["server_cores"] = args.server_cores
    try:
        ports = [free_port(), free_port()]
        start_server(f"{backend}-0", ports[0])
        one = Server(ports[:1])
        results["overhead"] = asyncio.run(overhead(one, fake, bench_user, args.pairs))
        print(json.dumps(results["overhead"]), file=sys.stderr)

        async def replay_size() -> int:
            async with socket_connect(one.url(), probe_user.cookie, "probe") as socket:
                return await drain_replay(socket, None, quiet=1.0)

        replay_frames = asyncio.run(replay_size())
        results["replay_frames"] = replay_frames
        model_with_delay(fake, args.model_ms / 1000)
        sweep = []

        def step(server: Server, count: int, mode: str) -> None:
            processes.sample_cpu()
            before = sum(processes.cpu_by_name().values())
            machine_before, bench_before, wall_before = machine_cpu(), time.process_time(), time.monotonic()
            row = asyncio.run(load(server, crowd[:count], probe_user, replay_frames, mode, args.seconds))
            processes.sample_cpu()
            wall = time.monotonic() - wall_before
            turns = row["turns_per_s"] * args.seconds
            # Server CPU per turn, warm-up included in the CPU (an upper bound).
            cpu = sum(processes.cpu_by_name().values()) - before
            row["server_cpu_ms_per_turn"] = round(1000 * cpu / turns, 1) if turns else None
            # Cores busy over the step, warm-up included: the servers, this process (the load's clients
            # and the fake model), and the whole machine (PostgreSQL, Redis and anything else running).
            row["cores_busy"] = {
                "servers": round(cpu / wall, 2),
                "bench": round((time.process_time() - bench_before) / wall, 2),
                "machine": round((machine_cpu() - machine_before) / wall, 2),
            }
            print(json.dumps(row), file=sys.stderr)
            sweep.append(row)

        for mode in ("http", "ws"):
            for count in args.users:
                step(one, count, mode)
        if backend == "postgres":
            start_server(f"{backend}-1", ports[1])
            for mode in ("http", "ws"):
                step(Server(ports), max(args.users), mode)
        results["sweep"] = sweep
    finally:
        try:
            processes.stop_all()
        finally:
            if caps is not None:
                caps.remove()
            model_with_delay(fake, 0)
    return results


# --- report --------------------------------------------------------------------------------------


def report(all_results: list[dict[str, Any]], command: str) -> str:
    lines = [f"Command: `{command}`", ""]
    lines += [
        "| backend | HTTP: Buddy / direct p50 | HTTP overhead p50 / p95 | WebSocket: Buddy / direct p50 "
        "| WebSocket overhead p50 / p95 | first delta after the model's, p50 / p95 | queries per turn "
        "(+ rate limit) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in all_results:
        http, ws = result["overhead"]["http"], result["overhead"]["ws"]
        delta = result["overhead"]["first_delta_ms"]
        queries = result["queries"]
        capped = f" (capped at {result['server_cores']} cores)" if result.get("server_cores") else ""
        lines.append(
            f"| {result['backend']}{capped} | {http['buddy_ms']['p50']} / {http['direct_ms']['p50']} ms "
            f"| **{http['overhead_p50_ms']}** / {http['overhead_p95_ms']} ms "
            f"| {ws['buddy_ms']['p50']} / {ws['direct_ms']['p50']} ms "
            f"| **{ws['overhead_p50_ms']}** / {ws['overhead_p95_ms']} ms "
            f"| {delta.get('p50')} / {delta.get('p95')} ms | {queries['turn']} ({queries['with_rate_limit']}) |"
        )
    lines += [
        "",
        "| backend | processes | transport | users | turns/s | another user's connect + replay p50 / p95 "
        "| /healthz p50 / p95 | server CPU per turn | cores busy: servers / bench / machine | errors |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in all_results:
        cap = f" × {result['server_cores']} cores" if result.get("server_cores") else ""
        for row in result["sweep"]:
            busy = row.get("cores_busy", {})
            lines.append(
                f"| {result['backend']} | {row['processes']}{cap} | {row['mode']} | {row['users']} "
                f"| **{row['turns_per_s']}** | {row['replay_ms'].get('p50')} / {row['replay_ms'].get('p95')} ms "
                f"| {row['healthz_ms'].get('p50')} / {row['healthz_ms'].get('p95')} ms "
                f"| {row.get('server_cpu_ms_per_turn')} ms "
                f"| {busy.get('servers')} / {busy.get('bench')} / {busy.get('machine')} | {row['error_count']} |"
            )
    return "\n".join(lines)


def plot(all_results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (throughput, latency) = plt.subplots(1, 2, figsize=(11, 4))
    for result in all_results:
        for mode in ("http", "ws"):
            rows = [r for r in result["sweep"] if r["mode"] == mode and r["processes"] == 1]
            label = f"{result['backend']} {mode}"
            throughput.plot([r["users"] for r in rows], [r["turns_per_s"] for r in rows], marker="o", label=label)
            latency.plot([r["users"] for r in rows], [r["replay_ms"].get("p95") for r in rows], marker="o", label=label)
    throughput.set(xlabel="users prompting back to back (model 500 ms)", ylabel="turns/s", title="Throughput")
    latency.set(
        xlabel="users prompting back to back", ylabel="ms", title="Another user's connect + replay, p95", yscale="log"
    )
    for axes in (throughput, latency):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


fake_text: FirstText


def main() -> None:
    global fake_text
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--pairs", type=int, default=200, help="alternating Buddy/direct pairs per transport")
    parser.add_argument("--seconds", type=float, default=15, help="seconds of each load step")
    parser.add_argument("--model-ms", type=float, default=500, help="the model's time per call in the sweep")
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument(
        "--users",
        type=lambda text: [int(n) for n in text.split(",")],
        default=list(USER_COUNTS),
        help="the sweep's numbers of users, comma-separated (default 1,10,50)",
    )
    parser.add_argument(
        "--server-cores",
        type=cores_share,
        default=None,
        help="cap each server process at this many cores (a CPU cgroup of its own; needs root)",
    )
    args = parser.parse_args()
    if args.server_cores and args.plot:
        parser.error("--plot draws the uncapped sweep: run it without --server-cores")
    command = ".venv/bin/python bench/turn.py " + " ".join(sys.argv[1:])
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    from devtools.fake_anthropic import FakeAnthropic

    fake_text = FirstText()
    fake = FakeAnthropic(api_key="bench-key").start()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    results = []
    try:
        for backend in backends:
            # Django is set up once per process: each backend runs in a process of its own.
            if len(backends) > 1:
                import subprocess

                out = OUT_DIR / f"{backend}.json"
                argv = [sys.executable, __file__, "--backend", backend, "--pairs", str(args.pairs)]
                argv += ["--seconds", str(args.seconds), "--model-ms", str(args.model_ms)]
                argv += ["--users", ",".join(map(str, args.users))]
                argv += ["--server-cores", str(args.server_cores)] if args.server_cores else []
                subprocess.run(argv, check=True)
                results.append(json.loads(out.read_text()))
            else:
                result = run_backend(backend, args, fake)
                (OUT_DIR / f"{backend}.json").write_text(json.dumps(result, indent=1))
                results.append(result)
    finally:
        fake.stop()
    text = report(results, command)
    (OUT_DIR / "summary.md").write_text(text + "\n")
    if args.plot:
        plot(results, args.plot)
    print(text)
    print(
        f"Machine: {os.cpu_count()} cores, {python_speed_ms():.0f} ms of CPU for 2 M Python additions;"
        f" load average before the run {os.getloadavg()}",
        file=sys.stderr,
    )


def cores_share(text: str) -> float:
    """A number of cores a CFS quota can hold: at least 0.01 (a 1 ms quota in a 100 ms period)."""
    cores = float(text)
    if not cores >= 0.01:
        raise argparse.ArgumentTypeError("at least 0.01 cores")
    return cores


def python_speed_ms() -> float:
    """The CPU time of a fixed pure-Python loop, the median of 5: how fast this machine runs Python, to
    compare figures taken on different machines (the turn's cost is Python, as good as all of it)."""
    runs = []
    for _ in range(5):
        started = time.process_time()
        total = 0
        for n in range(2_000_000):
            total += n
        runs.append(time.process_time() - started)
    return 1000 * statistics.median(runs)


if __name__ == "__main__":
    main()
