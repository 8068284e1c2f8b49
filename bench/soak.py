"""Soak: two daphne processes, a django-q2 worker, PostgreSQL and Redis under steady prompts, one crash.

Everything runs on loopback. The bench process starts the fake Messages API (devtools/fake_anthropic.py;
it answers instantly, with canvas tool calls for some prompts and a short text otherwise), two daphne
processes and one `manage.py qcluster` on a database of its own (`buddy_soak`, recreated each run)
and a Redis channel prefix of its own. Then:

- every user (default 50) keeps one WebSocket open (session cookie made in the database, Origin set),
  half of them on each server process, and follows the canvas frames as a browser would (a gap in
  `version` asks for a replay);
- prompts arrive at `--rate` per second for `--duration` seconds, each to a random user that has no
  prompt in flight, as `POST /prompt` with a bearer token and an `Idempotency-Key`; a user's HTTP
  server is not always its socket's server, so frames cross processes through Redis. A connection
  error, a timeout or a 5xx (and a 409 on a repeated key: the first try may still hold the turn) is
  retried with the same key on the other server process, with backoff, for up to `--give-up` seconds;
- at `--kill-at` seconds one server process gets SIGKILL and is started again on the same port
  `--down` seconds later.

Afterwards it checks, from the database: every prompt answered 200 is archived exactly once and its
reply's message exists; an unanswered prompt is archived at most once; every canvas equals the
replay of its archived canvas tool calls (results that are not errors, in order, through
`canvas.services.canvas_reduce`), and its version counts them; every session's window is valid
(`window_preview` against devtools/window_rules.py); every socket's canvas equals the stored one. It
prints a Markdown summary and writes it (with the raw figures as JSON) under var/bench/soak/, and the
latency plot to `--plot`.

    .venv/bin/python bench/soak.py [--duration 300] [--rate 5] [--users 50] [--kill-at 120]
                                   [--down 3] [--plot docs/bench-soak.png]

Ctrl-C (or any error) stops every process the bench started. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import BENCH_DIR, ROOT, setup  # noqa: E402
from devtools.servers import (
    free_port,  # noqa: E402
    wait_until_up,  # noqa: E402
)

PG_SERVER = "postgres://postgres@127.0.0.1:5432"
REDIS_URL = "redis://127.0.0.1:6379/0"
OUT_DIR = BENCH_DIR / "soak"

# What the prompts ask for (the fake model's answer depends on it), with weights.
VERBS = {
    "plain": 45,
    "add": 18,
    "update": 12,
    "remove": 8,
    "two": 7,
    "chain": 5,
    "theme": 3,
    "clear": 2,
}
PROMPT_RE = re.compile(r"u(?P<user>\d+) #(?P<n>\d+) (?P<verb>[a-z]+):")
FILLER = "Please keep this in mind for later, it matters for the plan we are making together."


# --- the fake model ------------------------------------------------------------------------------


def _is_prompt(message: dict[str, Any]) -> bool:
    content = message["content"]
    if isinstance(content, str):
        return message["role"] == "user"
    return message["role"] == "user" and not any(block.get("type") == "tool_result" for block in content)


def _first_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return next((block.get("text", "") for block in content if block.get("type") == "text"), "")


def responder(body: dict[str, Any]):
    """Canvas tool calls with element ids derived from the prompt, else a short text."""
    from devtools.fake_anthropic import Reply

    if not body.get("tools"):  # a summary call
        return Reply([{"type": "text", "text": "The user and the assistant planned things; cards were kept."}])
    messages = body["messages"]
    start = max((i for i, message in enumerate(messages) if _is_prompt(message)), default=None)
    if start is None:
        return Reply([{"type": "text", "text": "Go on."}])
    match = PROMPT_RE.search(_first_text(messages[start]))
    rounds = len(messages) - start - 1  # assistant + tool_result messages since the prompt
    if match is None:
        return Reply([{"type": "text", "text": "Noted."}])
    n, verb = int(match["n"]), match["verb"]
    if rounds:
        if verb == "chain" and rounds == 2:  # a second round of tool calls in the same turn
            return Reply([_use("canvas_update_card", {"id": f"c{n % 4}", "body": f"chained {n}"})])
        return Reply([{"type": "text", "text": f"Done with #{n}."}])
    calls = {
        "add": [_use("canvas_add_card", {"id": f"c{n % 4}", "title": f"Card {n}", "body": f"body {n}"})],
        "update": [_use("canvas_update_card", {"id": f"c{(n + 1) % 4}", "body": f"updated {n}"})],
        "remove": [_use("canvas_remove_element", {"id": f"c{(n + 2) % 4}"})],
        "two": [
            _use("canvas_show_text", {"id": f"t{n % 3}", "content": f"text {n}"}),
            _use("canvas_add_card", {"id": f"c{n % 4}", "title": f"Card {n}"}),
        ],
        "chain": [_use("canvas_add_card", {"id": f"c{n % 4}", "title": f"Chain {n}"})],
        "theme": [_use("canvas_set_theme", {"theme": "dark" if n % 2 else "light"})],
        "clear": [_use("canvas_set_mode", {"mode": "clear"})],
    }.get(verb)
    if calls is None:
        return Reply([{"type": "text", "text": f"Noted #{n}."}])
    return Reply([{"type": "text", "text": "On it."}, *calls])


def _use(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": tool_input}


# --- processes --------------------------------------------------------------------------------------


class Processes:
    """The server processes this bench started, each in a process group of its own (the worker forks)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.running: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.starts: collections.Counter[str] = collections.Counter()
        self.cpu: dict[tuple[str, int], float] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        self.starts[name] += 1
        log = OUT_DIR / f"{name}.{self.starts[name]}.log"
        log.parent.mkdir(parents=True, exist_ok=True)  # bench/turn.py starts processes before any soak ran
        self.logs[f"{name}.{self.starts[name]}"] = log
        with log.open("wb") as output:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.running[name] = process
        return process

    def start_daphne(self, name: str, port: int) -> None:
        self.start(
            name, [sys.executable, "-m", "buddy.server", "-b", "127.0.0.1", "-p", str(port), "buddy.asgi:application"]
        )
        wait_until_up(f"http://127.0.0.1:{port}", self.running[name])

    def sample_cpu(self) -> None:
        """Remember the CPU seconds of every process in our groups (a killed one keeps its last sample)."""
        groups = {process.pid: name for name, process in self.running.items()}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                group = int(fields[2])  # pgrp
                if group in groups:
                    ticks = int(fields[11]) + int(fields[12])  # utime + stime
                    self.cpu[(groups[group], int(stat.parent.name))] = ticks / os.sysconf("SC_CLK_TCK")

    def cpu_by_name(self) -> dict[str, float]:
        totals: collections.Counter[str] = collections.Counter()
        for (name, _pid), seconds in self.cpu.items():
            totals[name] += seconds
        return dict(totals)

    def kill(self, name: str) -> None:
        self.sample_cpu()
        process = self.running.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop_all(self) -> None:
        for process in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 8  # daphne waits for open sockets on SIGTERM; then SIGKILL
        for process in self.running.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            with contextlib.suppress(ProcessLookupError):  # what is left of the group (worker children)
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.running.clear()


def database_recreate(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{PG_SERVER}/{name}"


# --- the load ---------------------------------------------------------------------------------------


@dataclass
class Attempt:
    server: int
    started: float
    ended: float
    outcome: str  # an HTTP status as text, "timeout" or "connection"


@dataclass
class Prompt:
    user: int
    number: int
    verb: str
    text: str
    key: str
    sent: float
    attempts: list[Attempt] = field(default_factory=list)
    status: str = ""
    message_id: int | None = None
    done: float | None = None


@dataclass
class User:
    index: int
    pk: int
    username: str
    token: str
    cookie: str
    socket_server: int
    http_server: int
    busy: bool = False
    prompts: int = 0


class SocketView:
    """One user's socket: its frames and the canvas as a browser would hold it (web/consumers.py)."""

    def __init__(self) -> None:
        self.frames: collections.Counter[str] = collections.Counter()
        self.connects = 0
        self.connect_failures = 0
        self.drops = 0
        self.gaps = 0
        self.replays_asked = 0
        self.server_history: list[int] = []
        self.assistant_ids: set[int] = set()
        self.reset()

    def reset(self) -> None:
        self.version = -1
        self.replay_version: int | None = None
        self.replay_pending = False
        self.elements: list[dict[str, Any]] = []
        self.theme = ""

    def apply(self, frame: dict[str, Any]) -> bool:
        """Apply a canvas frame; True when the client must ask for a replay (a gap)."""
        from canvas.elements import TYPE_BY_ADD_COMMAND

        command, params, version = frame["command"], frame["params"], frame["version"]
        if command == "canvas_set_mode" and params.get("mode") == "clear" and version >= self.version:
            # A replay starts with a clear at the current version (or it is a live clear, the same thing).
            # The theme is not touched: a live clear keeps it, and a replay sends it after the elements.
            self.elements, self.version, self.replay_version, self.replay_pending = [], version, version, False
            return False
        if version == self.replay_version and (command in TYPE_BY_ADD_COMMAND or command == "canvas_set_theme"):
            self._change(command, params)  # the rest of a replay (a live duplicate of it is idempotent)
            return False
        if version <= self.version:
            return False  # a duplicate: already in the replay
        if version > self.version + 1:
            self.gaps += 1
            if self.replay_pending:
                return False
            self.replay_pending = True
            return True
        self.version, self.replay_version = version, None
        self._change(command, params)
        return False

    def _change(self, command: str, params: dict[str, Any]) -> None:
        from canvas.elements import TYPE_BY_ADD_COMMAND

        ids = [element["id"] for element in self.elements]
        if command in TYPE_BY_ADD_COMMAND:
            element = {"type": TYPE_BY_ADD_COMMAND[command].name, **params}
            if params["id"] in ids:
                self.elements[ids.index(params["id"])] = element
            else:
                self.elements.append(element)
        elif command == "canvas_update_card" and params["id"] in ids:
            index = ids.index(params["id"])
            self.elements[index] = {"type": self.elements[index]["type"], **params}
        elif command == "canvas_remove_element" and params["id"] in ids:
            self.elements.pop(ids.index(params["id"]))
        elif command == "canvas_set_mode" and params.get("mode") == "clear":
            self.elements = []
        elif command == "canvas_set_theme":
            self.theme = params["theme"]


class Soak:
    def __init__(self, args: argparse.Namespace, processes: Processes, ports: list[int], users: list[User]) -> None:
        self.args = args
        self.processes = processes
        self.ports = ports
        self.users = users
        self.views = [SocketView() for _ in users]
        self.prompts: list[Prompt] = []
        self.run_id = uuid.uuid4().hex[:6]
        self.t0 = 0.0
        self.events: dict[str, float] = {}
        self.dispatch_lag: list[float] = []
        self.stopping = asyncio.Event()
        self.idle = asyncio.Event()
        self.rng = random.Random(args.seed)
        self.in_flight = [0, 0]

    def now(self) -> float:
        return time.monotonic() - self.t0

    def url(self, server: int) -> str:
        return f"http://127.0.0.1:{self.ports[server]}"

    async def run(self) -> None:
        import httpx2

        self.t0 = time.monotonic()
        sockets = [asyncio.create_task(self.socket_loop(user)) for user in self.users]
        await asyncio.sleep(3)  # let every socket connect and replay first
        self.t0 = time.monotonic()
        limits = httpx2.Limits(max_connections=200, max_keepalive_connections=100)
        timeout = httpx2.Timeout(self.args.timeout, connect=5)
        async with httpx2.AsyncClient(limits=limits, timeout=timeout) as client:
            killer = asyncio.create_task(self.kill_and_restart())
            sampler = asyncio.create_task(self.sample_cpu())
            self.processes.sample_cpu()
            self.cpu_at_start = (self.processes.cpu_by_name(), time.process_time())
            in_flight = await self.dispatch(client)
            self.events["dispatch_end"] = self.now()
            await asyncio.gather(*in_flight)
            self.events["drained"] = self.now()
            await killer
            sampler.cancel()
            self.processes.sample_cpu()
            self.cpu_at_end = (self.processes.cpu_by_name(), time.process_time())
        await asyncio.sleep(self.args.settle)  # the last frames reach the sockets
        self.stopping.set()
        for task in sockets:
            task.cancel()
        await asyncio.gather(*sockets, return_exceptions=True)

    async def dispatch(self, client) -> list[asyncio.Task]:
        tasks: list[asyncio.Task] = []
        weights = list(VERBS.values())
        k = 0
        while True:
            due = k / self.args.rate
            if due >= self.args.duration:
                return tasks
            await asyncio.sleep(max(due - self.now(), 0))
            idle = [user for user in self.users if not user.busy]
            while not idle:
                self.idle.clear()
                await self.idle.wait()
                idle = [user for user in self.users if not user.busy]
            self.dispatch_lag.append(self.now() - due)
            user = self.rng.choice(idle)
            user.busy = True
            user.prompts += 1
            verb = self.rng.choices(list(VERBS), weights)[0]
            text = f"[soak {self.run_id}] u{user.index:02d} #{user.prompts:03d} {verb}: {FILLER}"
            prompt = Prompt(user.index, user.prompts, verb, text, f"soak-{uuid.uuid4().hex}", self.now())
            self.prompts.append(prompt)
            tasks.append(asyncio.create_task(self.send(client, user, prompt)))
            k += 1

    async def send(self, client, user: User, prompt: Prompt) -> None:
        import httpx2

        server, delay = user.http_server, 0.2
        headers = {"Authorization": f"Bearer {user.token}", "Idempotency-Key": prompt.key}
        try:
            while True:
                started = self.now()
                self.in_flight[server] += 1
                try:
                    response = await client.post(
                        f"{self.url(server)}/prompt", json={"text": prompt.text}, headers=headers
                    )
                    outcome = str(response.status_code)
                except httpx2.TimeoutException:
                    outcome = "timeout"
                except httpx2.TransportError:
                    outcome = "connection"
                finally:
                    self.in_flight[server] -= 1
                prompt.attempts.append(Attempt(server, started, self.now(), outcome))
                if outcome == "200":
                    prompt.status, prompt.message_id, prompt.done = "200", response.json()["message_id"], self.now()
                    return
                retry = outcome in ("timeout", "connection", "409") or (outcome.isdigit() and int(outcome) >= 500)
                if outcome == "502" or not retry or self.now() - prompt.sent > self.args.give_up:
                    prompt.status = outcome
                    return
                server = 1 - server
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        finally:
            user.busy = False
            self.idle.set()

    async def sample_cpu(self) -> None:
        while True:
            await asyncio.sleep(2)
            await asyncio.to_thread(self.processes.sample_cpu)

    async def kill_and_restart(self) -> None:
        if self.args.kill_at is None or self.args.kill_at >= self.args.duration:
            return
        await asyncio.sleep(max(self.args.kill_at - self.now(), 0))
        deadline = self.now() + 10
        while not self.in_flight[0] and self.now() < deadline:  # kill it with work in hand
            await asyncio.sleep(0.005)
        self.events["kill"] = self.now()
        self.events["in_flight_at_kill"] = self.in_flight[0]
        self.processes.kill("daphne-0")
        await asyncio.sleep(self.args.down)
        self.events["restart"] = self.now()
        await asyncio.to_thread(self.processes.start_daphne, "daphne-0", self.ports[0])
        self.events["up"] = self.now()

    async def socket_loop(self, user: User) -> None:
        from django.conf import settings
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        view = self.views[user.index]
        server = user.socket_server
        cookie = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={user.cookie}"}
        while not self.stopping.is_set():
            url = f"ws://127.0.0.1:{self.ports[server]}/ws/?agent=buddy&chat_id=main"
            connected = False
            try:
                async with connect(
                    url, origin=self.url(server), additional_headers=cookie, open_timeout=10, max_size=2**20
                ) as ws:
                    connected = True
                    view.connects += 1
                    view.server_history.append(server)
                    view.reset()
                    async for raw in ws:
                        frame = json.loads(raw)
                        kind = frame.get("type", "?")
                        view.frames[kind] += 1
                        if kind == "canvas_command" and view.apply(frame):
                            view.replays_asked += 1
                            await ws.send(json.dumps({"type": "replay"}))
                        elif kind == "assistant_message" and frame.get("message_id"):
                            view.assistant_ids.add(frame["message_id"])
            except (OSError, ConnectionClosed, InvalidHandshake, TimeoutError):
                pass
            if self.stopping.is_set():
                return
            if connected:
                view.drops += 1  # try the same process again first
            else:
                view.connect_failures += 1
                server = 1 - server  # as a load balancer would: try the other process
            await asyncio.sleep(0.5)


# --- verification ------------------------------------------------------------------------------------


def verify(soak: Soak) -> dict[str, Any]:
    from django.db import close_old_connections

    from agent.models import IdempotencyKey
    from canvas.models import CanvasState
    from canvas.services import CanvasCommandError, canvas_reduce
    from canvas.tools import CANVAS_TOOL_NAMES
    from conversations.content import text_of
    from conversations.models import Message, ModelCall, Session
    from conversations.window import window_limits, window_preview
    from devtools.window_rules import assert_valid_window
    from memory.models import Summary

    close_old_connections()
    user_pks = [user.pk for user in soak.users]
    sessions = {s.user_id: s for s in Session.objects.filter(user_id__in=user_pks).select_related("agent")}
    archived: collections.Counter[str] = collections.Counter()
    prompt_rows: dict[str, Message] = {}
    by_session: dict[int, list[Message]] = collections.defaultdict(list)
    for message in Message.objects.filter(session__in=sessions.values()).order_by("id"):
        by_session[message.session_id].append(message)
        if message.role == "user" and message.is_turn_start:
            text = text_of(message.content)
            archived[text] += 1
            prompt_rows.setdefault(text, message)
    texts = {prompt.text for prompt in soak.prompts}
    result: dict[str, Any] = {"unexpected_prompts": sum(n for t, n in archived.items() if t not in texts)}

    # Prompts: every 200 archived exactly once with its reply; never two copies of anything.
    lost, duplicated, answered_ok = [], [], 0
    unanswered = collections.Counter()
    calls_by_session: dict[int, list[ModelCall]] = collections.defaultdict(list)
    for call in ModelCall.objects.filter(session__in=sessions.values(), kind=ModelCall.Kind.CHAT).order_by("id"):
        calls_by_session[call.session_id].append(call)
    message_ids = {m.id: m for rows in by_session.values() for m in rows}
    model_ms: dict[str, int] = {}
    for prompt in soak.prompts:
        count = archived[prompt.text]
        if count > 1:
            duplicated.append(prompt.text)
        if prompt.status == "200":
            reply = message_ids.get(prompt.message_id)
            session = sessions[soak.users[prompt.user].pk]
            if count != 1 or reply is None or reply.role != "assistant" or reply.session_id != session.id:
                lost.append(prompt.text)
            else:
                answered_ok += 1
                row = prompt_rows[prompt.text]
                model_ms[prompt.key] = sum(
                    call.latency_ms
                    for call in calls_by_session[session.id]
                    if row.created_at <= call.created_at <= reply.created_at
                )
        else:
            unanswered[f"{prompt.status or 'unfinished'}, archived {count}x"] += 1
    result.update(
        answered_ok=answered_ok, lost=lost, duplicated=duplicated, unanswered=dict(unanswered), model_ms=model_ms
    )

    # Canvases: the stored state is the replay of the archived canvas tool calls that succeeded.
    canvas_mismatch, socket_mismatch, windows_bad = [], [], []
    states = {state.session_id: state for state in CanvasState.objects.filter(session__in=sessions.values())}
    replay_errors = 0
    for user in soak.users:
        session = sessions.get(user.pk)
        if session is None:
            continue
        replayed = CanvasState(session_id=session.pk)
        changes, uses = 0, {}
        for message in by_session[session.id]:
            for block in message.content:
                if block.get("type") == "tool_use" and message.role == "assistant":
                    uses[block["id"]] = block
                elif block.get("type") == "tool_result" and not block.get("is_error"):
                    use = uses.get(block["tool_use_id"])
                    if use is None or use["name"] not in CANVAS_TOOL_NAMES:
                        continue
                    try:
                        canvas_reduce(replayed, command=use["name"], params=use["input"])
                        changes += 1
                    except CanvasCommandError:
                        replay_errors += 1
        stored = states.get(session.pk) or CanvasState(session_id=session.pk)
        same = (replayed.elements, replayed.mode, replayed.theme, changes) == (
            stored.elements,
            stored.mode,
            stored.theme,
            stored.version,
        )
        if not same:
            canvas_mismatch.append(f"{user.username}: stored v{stored.version} {stored.elements} vs replay {changes}")
        view = soak.views[user.index]
        if (view.elements, view.theme) != (stored.elements, stored.theme):
            socket_mismatch.append(f"{user.username}: socket v{view.version} vs stored v{stored.version}")
        try:
            window = window_preview(session=session)
            assert_valid_window(
                window,
                archive=by_session[session.id],
                limits=window_limits(),
                stored_before=Session.objects.get(pk=session.pk).window_start_id,
            )
        except AssertionError as error:
            windows_bad.append(f"{user.username}: {error}")
    result.update(
        sessions=len(sessions),
        messages=sum(len(rows) for rows in by_session.values()),
        canvas_changes=sum(state.version for state in states.values()),
        canvas_mismatch=canvas_mismatch,
        canvas_replay_errors=replay_errors,
        socket_mismatch=socket_mismatch,
        windows_bad=windows_bad,
        window_steps=Session.objects.filter(pk__in=[s.pk for s in sessions.values()], window_start_id__gt=0).count(),
        leases_held=Session.objects.filter(pk__in=[s.pk for s in sessions.values()]).exclude(turn_lease_id="").count(),
        keys_without_answer=IdempotencyKey.objects.filter(user_id__in=user_pks, response__isnull=True).count(),
        summaries=Summary.objects.filter(session__in=sessions.values()).count(),
        summary_calls=ModelCall.objects.filter(session__in=sessions.values(), kind=ModelCall.Kind.SUMMARY).count(),
        failed_model_calls=ModelCall.objects.filter(session__in=sessions.values()).exclude(error="").count(),
    )
    close_old_connections()
    return result


# --- report -------------------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def summarise(soak: Soak, checks: dict[str, Any], command: str, elapsed: float) -> tuple[str, dict[str, Any]]:
    args = soak.args
    prompts = soak.prompts
    attempts = [attempt for prompt in prompts for attempt in prompt.attempts]
    outcomes = collections.Counter(attempt.outcome for attempt in attempts)
    ok = [prompt for prompt in prompts if prompt.status == "200"]
    clean = [prompt for prompt in ok if len(prompt.attempts) == 1]
    post_ms = [1000 * (p.attempts[0].ended - p.attempts[0].started) for p in clean]
    server_ms = [ms - checks["model_ms"].get(p.key, 0) for ms, p in zip(post_ms, clean, strict=True)]
    model_ms = [checks["model_ms"].get(p.key, 0) for p in clean]
    retried = [prompt for prompt in ok if len(prompt.attempts) > 1]
    total_ms = [1000 * (p.done - p.sent) for p in retried]
    window = args.duration
    answered_in_window = sum(1 for p in ok if p.done is not None and p.done <= window)
    views = soak.views
    frames = collections.Counter()
    for view in views:
        frames.update(view.frames)
    replied = [p for p in ok if p.message_id]
    seen = sum(1 for p in replied if p.message_id in views[p.user].assistant_ids)
    figures = {
        "prompts_sent": len(prompts),
        "answered_200": len(ok),
        "held_per_s": answered_in_window / window,
        "sent_per_s": len(prompts) / window,
        "dispatch_lag_p99_s": percentile(soak.dispatch_lag, 0.99),
        "post_ms": {q: percentile(post_ms, q / 100) for q in (50, 95, 99)},
        "server_ms": {q: percentile(server_ms, q / 100) for q in (50, 95, 99)},
        "model_ms": {q: percentile(model_ms, q / 100) for q in (50, 95, 99)},
        "post_ms_max": max(post_ms, default=float("nan")),
        "retried_prompts": len(retried),
        "retried_total_ms": sorted(total_ms),
        "attempt_outcomes": dict(outcomes),
        "retries": len(attempts) - len(prompts),
        "frames": dict(frames),
        "socket_connects": sum(v.connects for v in views),
        "socket_reconnects": sum(max(v.connects - 1, 0) for v in views),
        "socket_connect_failures": sum(v.connect_failures for v in views),
        "socket_gaps": sum(v.gaps for v in views),
        "socket_replays_asked": sum(v.replays_asked for v in views),
        "sockets_per_server_at_end": dict(collections.Counter(v.server_history[-1] for v in views if v.server_history)),
        "replies_seen_on_socket": seen,
        "events": soak.events,
        "elapsed_s": elapsed,
    }
    figures.update({k: v for k, v in checks.items() if k != "model_ms"})

    def fmt(values: dict[int, float]) -> str:
        return " / ".join(f"{values[q]:.0f}" for q in (50, 95, 99))

    def joined(counter: dict[str, int]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(counter.items()))

    sessions, events = checks["sessions"], soak.events
    (cpu_start, bench_start), (cpu_end, bench_end) = soak.cpu_at_start, soak.cpu_at_end
    cpu = {name: cpu_end.get(name, 0) - cpu_start.get(name, 0) for name in cpu_end}
    cpu["bench (fake model + clients)"] = bench_end - bench_start
    span = soak.events["drained"]
    figures["cpu_seconds"] = cpu
    cpu_text = ", ".join(f"{name} {seconds:.0f} s ({100 * seconds / span:.0f} %)" for name, seconds in cpu.items())
    first_409 = sum(1 for p in prompts if p.attempts and p.attempts[0].outcome == "409")
    five_xx = sum(v for k, v in outcomes.items() if k.startswith("5"))
    rows = [
        ("prompts sent / answered 200", f"{len(prompts)} / {len(ok)}"),
        ("prompts/s sent / answered within the run", f"{figures['sent_per_s']:.2f} / {figures['held_per_s']:.2f}"),
        ("dispatch lag p99 (no idle user)", f"{figures['dispatch_lag_p99_s'] * 1000:.0f} ms"),
        ("POST /prompt, first try answered, p50/p95/p99", f"{fmt(figures['post_ms'])} ms (n={len(post_ms)})"),
        ("same minus the turn's ModelCall.latency_ms, p50/p95/p99", f"{fmt(figures['server_ms'])} ms"),
        ("model time per turn (ModelCall.latency_ms sum), p50/p95/p99", f"{fmt(figures['model_ms'])} ms"),
        ("slowest first-try POST", f"{figures['post_ms_max']:.0f} ms"),
        (
            "prompts answered after retries",
            f"{len(retried)} (total time {', '.join(f'{t / 1000:.1f}' for t in total_ms)} s)",
        ),
        ("attempts by outcome", joined(outcomes)),
        ("retries", f"{figures['retries']}"),
        (
            "409 answers (to a first try / to a repeated key) / 5xx",
            f"{first_409} / {outcomes.get('409', 0) - first_409} / {five_xx}",
        ),
        ("CPU during the prompts (share of one core)", cpu_text),
        (
            "server CPU per answered prompt",
            f"{1000 * sum(v for k, v in cpu.items() if k.startswith(('daphne', 'worker'))) / max(len(ok), 1):.0f} ms",
        ),
        ("**lost** (200 but not archived once, or no reply row)", f"**{len(checks['lost'])}**"),
        ("**duplicated** (archived twice or more)", f"**{len(checks['duplicated'])}**"),
        ("never answered (outcome, times archived)", f"{checks['unanswered'] or 'none'}"),
        ("prompts in the archive the bench never sent", f"{checks['unexpected_prompts']}"),
        (
            "canvases equal to the replay of their tool calls",
            f"{sessions - len(checks['canvas_mismatch'])} / {sessions} ({checks['canvas_changes']} changes)",
        ),
        ("sockets whose canvas equals the stored one", f"{len(views) - len(checks['socket_mismatch'])} / {len(views)}"),
        (
            "valid windows (devtools/window_rules.py)",
            f"{sessions - len(checks['windows_bad'])} / {sessions} ({checks['window_steps']} sessions stepped)",
        ),
        ("leases still held / keys without an answer", f"{checks['leases_held']} / {checks['keys_without_answer']}"),
        ("summaries written (calls)", f"{checks['summaries']} ({checks['summary_calls']})"),
        ("failed model calls", f"{checks['failed_model_calls']}"),
        ("messages archived", f"{checks['messages']}"),
        ("socket frames received", f"{sum(frames.values())} ({joined(frames)})"),
        (
            "socket connects / reconnects / failed connects",
            f"{figures['socket_connects']} / {figures['socket_reconnects']} / {figures['socket_connect_failures']}",
        ),
        ("version gaps seen / replays asked", f"{figures['socket_gaps']} / {figures['socket_replays_asked']}"),
        ("replies whose assistant_message reached the user's socket", f"{seen} / {len(replied)}"),
    ]
    lines = [
        "```",
        command,
        "```",
        "",
        f"{args.users} users, {args.rate}/s for {args.duration} s; daphne-0 killed at {events.get('kill', 0):.1f} s "
        f"with {events.get('in_flight_at_kill', 0)} POST in flight on it, "
        f"restarted at {events.get('restart', 0):.1f} s, answering at {events.get('up', 0):.1f} s; "
        f"BUDDY_CONTEXT_TOKENS={args.context_tokens}, lease {args.lease_seconds} s; wall time {elapsed:.0f} s.",
        "",
        "| figure | value |",
        "| --- | --- |",
        *(f"| {label} | {value} |" for label, value in rows),
    ]
    for name in ("lost", "duplicated", "canvas_mismatch", "socket_mismatch", "windows_bad"):
        for item in checks[name][:10]:
            lines.append(f"\n- {name}: {item}")
    return "\n".join(lines), figures


def plot(soak: Soak, checks: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [prompt for prompt in soak.prompts if prompt.status == "200"]
    clean = [prompt for prompt in ok if len(prompt.attempts) == 1]
    retried = [prompt for prompt in ok if len(prompt.attempts) > 1]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True, height_ratios=[3, 1.2])
    top.scatter(
        [p.sent for p in clean],
        [1000 * (p.attempts[0].ended - p.attempts[0].started) - checks["model_ms"].get(p.key, 0) for p in clean],
        s=4,
        alpha=0.5,
        label="POST /prompt minus model time (first try)",
    )
    if retried:
        top.scatter(
            [p.sent for p in retried],
            [1000 * (p.done - p.sent) for p in retried],
            s=18,
            marker="x",
            color="tab:red",
            label="answered after retries (total)",
        )
    top.set_yscale("log")
    top.set_ylabel("ms")
    buckets = collections.Counter(int(p.done // 5) for p in ok if p.done is not None)
    xs = sorted(buckets)
    bottom.step([5 * x for x in xs], [buckets[x] / 5 for x in xs], where="post")
    bottom.axhline(soak.args.rate, color="grey", linewidth=0.8, linestyle=":")
    bottom.set_ylim(0, max([soak.args.rate * 2, *(buckets[x] / 5 for x in xs)]) + 0.5)
    bottom.set_ylabel("answered/s")
    bottom.set_xlabel("seconds since the start")
    for axis in (top, bottom):
        if "kill" in soak.events:
            axis.axvline(soak.events["kill"], color="tab:red", linewidth=1)
            axis.axvline(soak.events["up"], color="tab:green", linewidth=1)
    top.set_title("Soak: 2 daphne + worker, PostgreSQL + Redis; red line SIGKILL of one, green back up", fontsize=10)
    top.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- set-up ------------------------------------------------------------------------------------------


def users_create(count: int) -> list[User]:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from conversations.tokens import api_token_create

    users = []
    for index in range(count):
        user = get_user_model().objects.create_user(f"soak{index:02d}", password=None, first_name=f"Soaker {index}")
        store = SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        users.append(
            User(
                index=index,
                pk=user.pk,
                username=user.username,
                token=api_token_create(user=user),
                cookie=store.session_key,
                socket_server=index % 2,
                http_server=(index // 2) % 2,  # half the users post to the other process than their socket's
            )
        )
    return users


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=300, help="seconds of prompts")
    parser.add_argument("--rate", type=float, default=5, help="prompts per second")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--kill-at", type=float, default=120, help="SIGKILL daphne-0 at this second (-1: never)")
    parser.add_argument("--down", type=float, default=3, help="seconds before it is started again")
    parser.add_argument("--give-up", type=float, default=180, help="a client stops retrying after this long")
    parser.add_argument("--timeout", type=float, default=20, help="seconds one POST may take")
    parser.add_argument("--settle", type=float, default=3, help="seconds for the last frames after the last reply")
    parser.add_argument("--context-tokens", type=int, default=2000, help="BUDDY_CONTEXT_TOKENS: small, so windows step")
    parser.add_argument("--lease-seconds", type=int, default=120, help="BUDDY_TURN_LEASE_SECONDS")
    parser.add_argument("--database", default="buddy_soak")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--plot", type=Path, default=None, help="write the latency plot here (PNG)")
    args = parser.parse_args()
    if args.kill_at < 0:
        args.kill_at = None
    command = ".venv/bin/python bench/soak.py " + " ".join(sys.argv[1:])
    OUT_DIR.mkdir(parents=True, exist_ok=True)

    from devtools.fake_anthropic import FakeAnthropic

    fake = FakeAnthropic(api_key="soak-key").start()
    fake.responder = responder
    env = {
        "DATABASE_URL": database_recreate(args.database),
        "REDIS_URL": REDIS_URL,
        "BUDDY_CHANNEL_PREFIX": f"buddy-soak-{uuid.uuid4().hex[:8]}",
        "BUDDY_LLM": "anthropic",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "soak-key",
        "BUDDY_CONTEXT_TOKENS": str(args.context_tokens),
        "BUDDY_TURN_LEASE_SECONDS": str(args.lease_seconds),
        "BUDDY_LLM_RETRIES": "0",
        "BUDDY_WORKERS": "1",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_SECRET_KEY": f"soak-{uuid.uuid4().hex}{uuid.uuid4().hex}",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "BUDDY_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    setup(env["DATABASE_URL"])
    from django.db import close_old_connections

    processes = Processes({**os.environ, **env, "DJANGO_SETTINGS_MODULE": "buddy.settings"})
    # SIGTERM stops the bench like Ctrl-C does: through the finally below.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        users = users_create(args.users)
        close_old_connections()
        ports = [free_port(), free_port()]
        processes.start("worker", [sys.executable, "manage.py", "qcluster"])
        for index, port in enumerate(ports):
            processes.start_daphne(f"daphne-{index}", port)
        print(f"servers on {ports}, fake model on {fake.base_url}; {args.duration:.0f} s of prompts", file=sys.stderr)
        soak = Soak(args, processes, ports, users)
        asyncio.run(soak.run())
        elapsed = time.monotonic() - started
        processes.stop_all()
        checks = verify(soak)
    finally:
        processes.stop_all()
        fake.stop()
    tracebacks = {name: log.read_text(errors="replace").count("Traceback") for name, log in processes.logs.items()}
    checks["tracebacks_in_logs"] = tracebacks
    summary, figures = summarise(soak, checks, command, elapsed)
    summary += f"\n\nTracebacks in the server logs (var/bench/soak/*.log): {tracebacks}\n"
    (OUT_DIR / "summary.md").write_text(summary + "\n")
    figures["prompts"] = [
        {
            "user": p.user,
            "n": p.number,
            "verb": p.verb,
            "sent": p.sent,
            "status": p.status,
            "attempts": [[a.server, round(a.started, 4), round(a.ended, 4), a.outcome] for a in p.attempts],
        }
        for p in soak.prompts
    ]
    (OUT_DIR / "figures.json").write_text(json.dumps(figures, indent=1, default=str))
    if args.plot:
        plot(soak, checks, args.plot)
    print(summary)
    bad = checks["lost"] or checks["duplicated"] or checks["canvas_mismatch"] or checks["windows_bad"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted: every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
