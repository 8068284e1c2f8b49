"""Serve Buddy: daphne (HTTP + WebSocket + static files) and the background worker, together.

While they run, this process looks for due scheduled prompts every SCHEDULE_CHECK_SECONDS and hands
each to the worker, so a prompt runs within seconds of its time (the task engine's own schedules
check once a minute at best; that check stays as a fallback for workers run without `serve`).

Ctrl-C (or SIGTERM) stops everything: each child leads a process group of its own (lib.processes),
is asked to stop, and whatever of its group is left STOP_GRACE_SECONDS later is killed; the command
returns once no process of any group is alive. A child also stops when this process dies, even by
SIGKILL (Linux).
"""

from __future__ import annotations

import signal
import sys
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from agent.tasks import schedules_run_due
from lib.processes import child_start, groups_stop

SCHEDULE_CHECK_SECONDS = 1.0
STOP_GRACE_SECONDS = 10.0


class Command(BaseCommand):
    help = "Run daphne and the django-q2 worker side by side; Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="Serve only (run workers elsewhere).")

    def handle(self, *args, host: str, port: int, no_worker: bool, **options):
        # daphne with bounded WebSocket reads and writes (buddy/server.py).
        commands = [[sys.executable, "-m", "buddy.server", "-b", host, "-p", str(port), "buddy.asgi:application"]]
        if not no_worker:
            commands.append([sys.executable, "manage.py", "qcluster"])
        self.stdout.write(f"Buddy on http://{host}:{port}/ (admin at /admin/, API docs at /api/docs) — Ctrl-C stops.")
        processes = [child_start(command) for command in commands]
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        next_check = 0.0
        try:
            while not stopping and all(process.poll() is None for process in processes):
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + SCHEDULE_CHECK_SECONDS
                    self.run_due_schedules()
                time.sleep(0.25)
        except KeyboardInterrupt:
            pass
        groups_stop(processes, grace=STOP_GRACE_SECONDS)
        failed = [process.returncode for process in processes if process.returncode not in (0, -2, -9, -15, 130)]
        if failed and not stopping:
            sys.exit(1)

    def run_due_schedules(self) -> int:
        """Claim what is due and queue it for the worker; never stops the server."""
        try:
            return schedules_run_due()
        except Exception as exc:  # the database may be busy or restarting: try again next second
            self.stderr.write(f"checking scheduled prompts failed: {exc}")
            return 0
        finally:
            close_old_connections()
