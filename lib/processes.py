"""Child processes that never outlive their parent (`manage.py serve`, README: Running).

Each child runs in a process group of its own, so everything it starts (the task worker's sentinel,
workers, monitor and pusher) can be found and stopped together, and on Linux it is told by the kernel
(PR_SET_PDEATHSIG) to stop when the process that started it dies, however that one died.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with(parent_pid: int) -> None:
    """In the child, before it runs its program: SIGTERM when the parent dies (Linux), and at once if
    it died already."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def child_start(command: Sequence[str], **popen: object) -> subprocess.Popen:
    """Start `command` as the leader of a new process group that dies with this process."""
    parent_pid = os.getpid()
    return subprocess.Popen(command, process_group=0, preexec_fn=lambda: _die_with(parent_pid), **popen)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies, which only wait to be reaped, are not)."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel whether the group has anyone at all
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def groups_stop(leaders: Sequence[subprocess.Popen], *, grace: float) -> None:
    """Stop the groups of `leaders`: SIGTERM to each leader (each stops its own children, finishing
    what they do), then, `grace` seconds later or at once if this process is interrupted again,
    SIGKILL to whatever is left in the groups. Returns once no process of any group is alive."""
    for leader in leaders:
        if leader.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                leader.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        while time.monotonic() < deadline and any(group_members(leader.pid) for leader in leaders):
            for leader in leaders:
                leader.poll()
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass  # a second Ctrl-C: no more waiting
    with contextlib.suppress(ValueError):  # not the main thread: it has no signal handlers to change
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a third one must not leave the groups half killed
    give_up = time.monotonic() + 10  # SIGKILL is not refused; only a process stuck in the kernel waits
    while time.monotonic() < give_up:
        alive = [leader.pid for leader in leaders if group_members(leader.pid)]
        if not alive:
            break
        for pgid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for leader in leaders:
            leader.poll()
        time.sleep(0.05)
    for leader in leaders:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=1)
