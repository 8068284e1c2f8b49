"""The background task engine (django-q2) runs a real task in a real worker process."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Success
from django_q.tasks import async_task

from agent.models import IdempotencyKey
from devtools.servers import ROOT, server_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_process_runs_a_queued_task(user):
    old = IdempotencyKey.objects.create(user=user, key="old", created_at=timezone.now() - timedelta(days=2))
    fresh = IdempotencyKey.objects.create(user=user, key="fresh")
    task_id = async_task("agent.tasks.idempotency_keys_prune", sync=False)  # into the ORM broker
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=server_env(BUDDY_WORKERS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not Success.objects.filter(id=task_id).exists() and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert Success.objects.get(id=task_id).result == 1
    assert not IdempotencyKey.objects.filter(pk=old.pk).exists()
    assert IdempotencyKey.objects.filter(pk=fresh.pk).exists()
