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


def test_a_worker_with_psycopgs_pool_runs_every_task_without_sharing_its_parents_connections(tmp_path):
    """As deployed on PostgreSQL (BUDDY_DB_POOL on): the cluster forks its processes after using the
    pool; each must open its own connections (conversations.connections), or two processes talk over
    one socket and tasks fail or hang."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: psycopg's pool")
    task_ids = [async_task("agent.tasks.idempotency_keys_prune", sync=False) for _ in range(10)]
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=server_env(BUDDY_WORKERS="2", BUDDY_DB_POOL="4"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while Success.objects.filter(id__in=task_ids).count() < len(task_ids) and time.monotonic() < deadline:
                time.sleep(0.3)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    output = log_path.read_text()
    assert Success.objects.filter(id__in=task_ids).count() == len(task_ids), output[-4000:]
    assert "Traceback" not in output, output[-4000:]


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
