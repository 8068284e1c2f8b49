"""`manage.py serve` (what `make run` runs): Ctrl-C leaves no process behind, idle or mid-turn, and its
children stop when it is killed (README: Running; lib/processes.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.utils import timezone

from agent.schedules import schedule_create
from devtools.servers import ROOT, free_port, server_env, wait_until_up

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc"),
]

# daphne, and the task worker: its main process, sentinel, monitor, pusher and BUDDY_WORKERS workers.
PROCESSES = 1 + 4 + 2


def processes() -> dict[int, tuple[int, int]]:
    """Every live process: pid → (parent pid, process group)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                table[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return table


def descendants(root: int) -> dict[int, int]:
    """The live descendants of `root`: pid → process group."""
    table = processes()
    found: dict[int, int] = {}
    parents = {root}
    while True:
        children = {pid for pid, (ppid, _) in table.items() if ppid in parents and pid not in found}
        if not children:
            return found
        found.update({pid: table[pid][1] for pid in children})
        parents = children


def serve_started(tmp_path: Path) -> tuple[subprocess.Popen, dict[int, int]]:
    """`manage.py serve` in a session of its own, as in a terminal, once all its processes run."""
    port = free_port()
    log = (tmp_path / f"serve-{port}.log").open("wb")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=server_env(BUDDY_TASKS_SYNC="0", BUDDY_WORKERS="2"),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", serve, timeout=180, log_path=Path(log.name))
        deadline = time.monotonic() + 120
        while len(children := descendants(serve.pid)) < PROCESSES:
            if time.monotonic() > deadline:
                pytest.fail(f"serve started {len(children)} processes:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(0.2)
    except BaseException:
        kill_all(serve)
        raise
    return serve, children


def kill_all(serve: subprocess.Popen) -> None:
    """SIGKILL serve and every process group of its descendants (a test that failed leaves nothing)."""
    for group in {serve.pid, *descendants(serve.pid).values()}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    serve.wait(timeout=30)


def left_over(children: dict[int, int]) -> list[int]:
    """Processes of `children`, or of their process groups, still alive."""
    groups = set(children.values())
    return [pid for pid, (_, group) in processes().items() if pid in children or group in groups]


def ctrl_c(serve: subprocess.Popen) -> None:
    os.killpg(serve.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
    try:
        serve.wait(timeout=90)
    except subprocess.TimeoutExpired:
        kill_all(serve)
        raise


@pytest.mark.parametrize("attempt", range(2))
def test_ctrl_c_on_an_idle_server_leaves_no_process(tmp_path, attempt):
    serve, children = serve_started(tmp_path)
    ctrl_c(serve)
    assert left_over(children) == []


@pytest.mark.parametrize("attempt", range(2))
def test_ctrl_c_mid_turn_leaves_no_process(tmp_path, user, agent, fake_anthropic, attempt):
    fake_anthropic.queue_text("a long answer " * 20)
    fake_anthropic.delay_stream(5)  # the worker is mid-turn for far longer than serve waits for it
    serve, children = serve_started(tmp_path)
    schedule_create(user=user, text="say something long", at=timezone.now())
    deadline = time.monotonic() + 60
    while not fake_anthropic.requests:  # the worker took the due prompt and asked the model
        assert time.monotonic() < deadline, "the worker never started the turn"
        time.sleep(0.2)
    ctrl_c(serve)
    assert left_over(children) == []


def test_serves_children_stop_when_it_is_killed(tmp_path):
    serve, children = serve_started(tmp_path)
    os.kill(serve.pid, signal.SIGKILL)  # no chance to stop anything itself
    serve.wait(timeout=10)
    deadline = time.monotonic() + 60
    while left_over(children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left_over(children) == []
