"""Hand due scheduled prompts to the task worker every second (what `serve` does beside daphne), for
deployments that run daphne and `qcluster` on their own (docs/deploy.md). Any number may run: each
due time is claimed once."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from agent.tasks import schedules_run_due

CHECK_SECONDS = 1.0


class Command(BaseCommand):
    help = "Queue due scheduled prompts every second (Ctrl-C stops); --once checks once."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Check once and exit.")

    def handle(self, *args, once: bool, **options):
        while True:
            try:
                queued = schedules_run_due()
                if queued:
                    self.stdout.write(f"queued {queued} scheduled prompt(s)")
            except Exception as exc:  # the database may be busy or restarting: try again next second
                self.stderr.write(f"checking scheduled prompts failed: {exc}")
            finally:
                close_old_connections()
            if once:
                return
            try:
                time.sleep(CHECK_SECONDS)
            except KeyboardInterrupt:
                return
