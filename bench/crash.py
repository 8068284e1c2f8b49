"""Recovery after kill -9 mid-turn (docs/security.md, "Crashes"), with the real server processes.

Chat: daphne (`python -m buddy.server`) runs a turn whose model (devtools/fake_anthropic.py, in this
process) streams slowly; once the reply has started, daphne is killed with SIGKILL and started again
at once, and a socket sends a prompt every half second until one is answered. Reported: seconds from
the kill to that answer (`assistant_message`), and how many prompts were refused meanwhile.

Scheduled prompt: `manage.py serve` (daphne, the worker, the schedule check) runs a scheduled prompt
whose model streams slowly; mid-turn every process of it is killed with SIGKILL, and serve is started
again at once. Reported: seconds from the restart to the run being done, and how many prompts the
chat holds (one: it ran exactly once).

    .venv/bin/python bench/crash.py                 # SQLite file under var/bench/
    .venv/bin/python bench/crash.py --postgres      # PostgreSQL (database recreated)
    .venv/bin/python bench/crash.py --repeats 5

Every wait is bounded; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")

sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402

from bench._django import fresh_database  # noqa: E402
from devtools.fake_anthropic import FakeAnthropic  # noqa: E402
from devtools.servers import buddy_server_start, free_port, wait_until_up  # noqa: E402


def database_prepare(postgres: bool) -> str:
    """A fresh database; returns its URL."""
    return fresh_database("crash", postgres=postgres, server=PG_SERVER)


def django_setup(database_url: str) -> str:
    """Migrate, make the user; returns a session cookie of theirs."""
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
    user, _ = get_user_model().objects.get_or_create(username="crash")
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def kill_tree(root: int) -> None:
    """SIGKILL `root` and every process of the groups it and its descendants lead."""
    groups = {root}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[1]) == root:
                    groups.add(int(fields[2]))
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(root, signal.SIGKILL)


async def wait_frame(ws, kind: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic())))
        if frame["type"] == kind or frame["type"] == "error":
            return frame


def open_socket(port: int, cookie: str, chat_id: str):
    return connect(
        f"ws://127.0.0.1:{port}/ws/?agent=buddy&chat_id={chat_id}",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=f"http://127.0.0.1:{port}",
        open_timeout=60,
    )


async def chat_recovery(env: dict[str, str], cookie: str, fake: FakeAnthropic, chat_id: str) -> tuple[float, int]:
    """Two daphne processes on one database: the turn runs on the first, which is killed; the chat is
    asked again on the second until it answers."""
    fake.queue_text("a slow answer " * 30)
    fake.delay_stream(2)
    log = (BENCH_DIR / "crash-daphne.log").open("ab")
    ports = [free_port(), free_port()]
    servers = [buddy_server_start(port, env, log) for port in ports]
    try:
        for port, server in zip(ports, servers, strict=True):
            wait_until_up(f"http://127.0.0.1:{port}", server, timeout=180)
        async with open_socket(ports[0], cookie, chat_id) as ws:
            await ws.send(json.dumps({"type": "prompt", "text": "start a long answer"}))
            frame = await wait_frame(ws, "assistant_delta")
            assert frame["type"] == "assistant_delta", frame
            killed = time.monotonic()
            servers[0].kill()
            servers[0].wait()
        fake.delay_stream(0)
        refused = 0
        async with open_socket(ports[1], cookie, chat_id) as ws:
            while True:
                await ws.send(json.dumps({"type": "prompt", "text": "are you there?"}))
                frame = await wait_frame(ws, "assistant_message")
                if frame["type"] == "assistant_message":
                    return time.monotonic() - killed, refused
                refused += 1
                await asyncio.sleep(0.5)
    finally:
        for server in servers:
            if server.poll() is None:
                server.terminate()
                server.wait(timeout=30)


def serve_start(env: dict[str, str], port: int) -> subprocess.Popen:
    log = (BENCH_DIR / "crash-serve.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_until_up(f"http://127.0.0.1:{port}", process, timeout=120)
    return process


def scheduled_recovery(env: dict[str, str], fake: FakeAnthropic, chat_id: str) -> tuple[float, float, int]:
    """Seconds from the restart to the run done, from serve answering again to the run done, and the
    prompts the chat holds."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agent.models import ScheduledRun
    from agent.schedules import schedule_create
    from conversations.models import Message
    from conversations.refs import ChatRef

    fake.queue_text("a slow scheduled answer " * 30)
    fake.delay_stream(2)
    asked = len(fake.requests)
    port = free_port()
    serve = serve_start(env, port)
    user = get_user_model().objects.get(username="crash")
    # Due now: serve claims it within a second and hands it to the worker.
    schedule = schedule_create(
        user=user, text="the scheduled prompt", chat=ChatRef.of(agent="buddy", chat_id=chat_id), at=timezone.now()
    )
    deadline = time.monotonic() + 120
    while len(fake.requests) == asked:
        if time.monotonic() > deadline:
            raise SystemExit("the worker never started the scheduled turn")
        time.sleep(0.1)
    kill_tree(serve.pid)
    serve.wait()
    fake.delay_stream(0)
    restarted = time.monotonic()
    serve = serve_start(env, port)
    up = time.monotonic()
    try:
        deadline = time.monotonic() + 300
        while not ScheduledRun.objects.filter(schedule=schedule, status=ScheduledRun.Status.DONE).exists():
            if time.monotonic() > deadline:
                raise SystemExit("the scheduled run did not finish within 300 s of the restart")
            time.sleep(0.2)
        done = time.monotonic()
        prompts = Message.objects.filter(
            session__chat_id=chat_id, role="user", content__0__text="the scheduled prompt"
        ).count()
        return done - restarted, done - up, prompts
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["chat", "scheduled"])
    args = parser.parse_args()

    database_url = database_prepare(args.postgres)
    cookie = django_setup(database_url)
    fake = FakeAnthropic().start()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "buddy.settings",
        "DATABASE_URL": database_url,
        "BUDDY_LLM": "anthropic",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "BUDDY_LLM_RETRIES": "0",
        "BUDDY_SUMMARIES": "off",
        "BUDDY_SEMANTIC_SEARCH": "off",
        "BUDDY_LOG_LEVEL": "WARNING",
        "BUDDY_TASKS_SYNC": "0",
        "BUDDY_PROMPTS_PER_MINUTE": "1000",
    }
    env.pop("REDIS_URL", None)
    chats, scheduled = [], []
    try:
        for index in range(args.repeats):
            if args.only != "scheduled":
                chats.append(asyncio.run(chat_recovery(env, cookie, fake, f"chat{index}")))
                took, refused = chats[-1]
                print(f"chat {index}: answered {took:.1f} s after the kill ({refused} refused)", flush=True)
            if args.only != "chat":
                scheduled.append(scheduled_recovery(env, fake, f"scheduled{index}"))
                took, after_up, prompts = scheduled[-1]
                print(
                    f"scheduled {index}: done {took:.1f} s after the restart, {after_up:.1f} s after serve "
                    f"answered again ({prompts} prompt)",
                    flush=True,
                )
    finally:
        fake.stop()
    machine = f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {machine}, load average {load}; database: {'PostgreSQL' if args.postgres else 'SQLite'}")
    if chats:
        times = [took for took, _ in chats]
        print(f"chat answers again after kill -9: median {statistics.median(times):.1f} s, max {max(times):.1f} s")
    if scheduled:
        times = [took for took, _, _ in scheduled]
        after_up = [took for _, took, _ in scheduled]
        prompts = sorted({count for _, _, count in scheduled})
        print(
            f"scheduled run done after the restart: median {statistics.median(times):.1f} s, "
            f"max {max(times):.1f} s; after serve answered again: median {statistics.median(after_up):.1f} s, "
            f"max {max(after_up):.1f} s; prompts per run: {prompts}"
        )


if __name__ == "__main__":
    main()
