"""Recovery after a crash (README: Settings, BUDDY_TURN_LEASE_SECONDS; docs/security.md): a process
killed with SIGKILL mid-turn leaves leases that expire within BUDDY_TURN_LEASE_SECONDS, after which
the chat answers again and a scheduled prompt's run is queued again and runs once. The killed
processes are real ones on this run's test database (a SQLite file, or PostgreSQL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from agent.models import ScheduledRun
from agent.schedules import schedule_claim_due, schedule_create
from agent.submit import prompt_submit
from agent.tasks import scheduled_runs_orphaned, schedules_run_due
from agent.turn import TurnRunning, turn_cancel, turn_is_running, turn_run
from conversations.models import Message, Session
from conversations.services import session_get_or_create
from devtools.servers import ROOT, server_env

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_SECONDS = 10  # the default, which the killed process uses


def wait_for(condition: Callable[[], object], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s")
        time.sleep(0.1)


def start_killable(code: str) -> subprocess.Popen:
    """A Django process running `code` against this test database (its output to the test's stderr)."""
    script = f"import django\ndjango.setup()\n{code}\n"
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=server_env())


def kill_hard(process: subprocess.Popen) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def test_a_chat_whose_process_was_killed_mid_turn_answers_again_once_its_lease_expires(
    user, agent, fake_anthropic, settings
):
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.queue_text("a long answer that never ends " * 10)
    fake_anthropic.delay_stream(5)  # its events come slowly: the process is killed mid-stream
    server = start_killable(
        "from django.contrib.auth import get_user_model\n"
        "from agent.submit import prompt_submit\n"
        f"prompt_submit(user=get_user_model().objects.get(pk={user.pk}), text='first')"
    )
    try:
        wait_for(lambda: fake_anthropic.requests and Session.objects.exclude(turn_lease_id="").exists())
    finally:
        kill_hard(server)
    killed_at = timezone.now()
    session = Session.objects.get()
    assert session.turn_lease_expires_at <= killed_at + timedelta(seconds=LEASE_SECONDS)
    fake_anthropic.delay_stream(0)

    def answered() -> bool:
        try:
            prompt_submit(user=user, text="are you there?")
        except TurnRunning:
            return False
        return True

    wait_for(answered, seconds=LEASE_SECONDS + 30)
    prompts = list(Message.objects.filter(role="user").order_by("id").values_list("content", flat=True))
    assert [blocks[0]["text"] for blocks in prompts] == ["first", "are you there?"]
    assert Message.objects.filter(role="assistant").exists()


def test_a_scheduled_turn_whose_worker_was_killed_runs_again_exactly_once(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.queue_text("never finished " * 10)
    fake_anthropic.delay_stream(5)
    schedule_create(user=user, text="water the plants", at=timezone.now())
    [run] = schedule_claim_due()
    worker = start_killable(f"from agent.tasks import scheduled_run_execute\nscheduled_run_execute(run_id={run.pk})")
    try:
        wait_for(lambda: fake_anthropic.requests and ScheduledRun.objects.filter(pk=run.pk, prompt__isnull=False))
    finally:
        kill_hard(worker)
    killed_at = timezone.now()
    run.refresh_from_db()
    assert run.status == ScheduledRun.Status.PENDING and run.lease_id
    assert run.lease_expires_at <= killed_at + timedelta(seconds=LEASE_SECONDS)
    if run.lease_expires_at > timezone.now() + timedelta(seconds=1):
        assert run.pk not in scheduled_runs_orphaned()  # its lease still holds: nobody queues it yet

    wait_for(lambda: ScheduledRun.objects.filter(pk=run.pk, lease_expires_at__lt=timezone.now()).exists())
    fake_anthropic.delay_stream(0)
    fake_anthropic.queue_text("Watered.")
    schedules_run_due()  # the periodic check (tasks run inline in the tests): queued again, and run
    run.refresh_from_db()
    assert run.status == ScheduledRun.Status.DONE and not run.lease_id
    prompts = Message.objects.filter(role="user", is_turn_start=True)
    assert [m.content[0]["text"] for m in prompts] == ["water the plants"]  # never a second prompt
    assert Message.objects.filter(role="assistant").last().content[0]["text"] == "Watered."
    schedules_run_due()
    assert Message.objects.filter(role="user", is_turn_start=True).count() == 1


def test_a_run_queued_but_never_taken_is_queued_again_and_a_running_one_is_not(user, agent, settings):
    settings.BUDDY_LLM = "offline"
    schedule_create(user=user, text="a", at=timezone.now())
    schedule_create(user=user, text="b", at=timezone.now())
    lost, running = schedule_claim_due()
    long_ago = timezone.now() - timedelta(minutes=5)
    ScheduledRun.objects.filter(pk=lost.pk).update(queued_at=long_ago)  # its task was lost
    ScheduledRun.objects.filter(pk=running.pk).update(
        queued_at=long_ago, lease_id="x" * 32, lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    assert scheduled_runs_orphaned() == [lost.pk]
    assert scheduled_runs_orphaned() == []  # marked as queued again: once


def test_the_heartbeat_keeps_a_turns_lease_while_the_model_is_slower_than_the_lease(session, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    settings.BUDDY_TURN_LEASE_SECONDS = 2
    fake_anthropic.queue_text("slow " * 30)
    fake_anthropic.delay_stream(3)  # longer than the lease between two events: only a heartbeat keeps it
    turn = threading.Thread(target=turn_run, kwargs={"session": session, "text": "take your time"})
    turn.start()
    try:
        wait_for(lambda: fake_anthropic.requests)
        held = []
        deadline = time.monotonic() + 7
        while time.monotonic() < deadline:
            held.append(turn_is_running(session=session))
            time.sleep(0.2)
        assert all(held)
    finally:
        turn_cancel(session=session)
        turn.join(timeout=30)
        fake_anthropic.delay_stream(0)
    assert not turn_is_running(session=session)
    assert session_get_or_create(user=session.user, agent_slug=None, chat_id=session.chat_id).pk == session.pk
