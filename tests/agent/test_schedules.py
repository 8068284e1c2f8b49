"""Scheduled prompts: exactly once per due time, across workers, through the same turn code."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import close_old_connections
from django.utils import timezone

from agent.models import ScheduledPrompt, ScheduledRun
from agent.schedules import ScheduleError, schedule_claim_due, schedule_create
from agent.tasks import scheduled_run_execute, schedules_run_due
from canvas.models import CanvasState
from conversations.models import Message, Session
from conversations.refs import ChatRef
from conversations.services import message_append, session_get_or_create
from devtools.servers import ROOT

CARD = "CANVAS: " + json.dumps(
    [{"name": "canvas_add_card", "input": {"id": "morning", "title": "Good morning", "body": "Stand-up at 9"}}]
)


@pytest.mark.django_db
def test_a_due_schedule_runs_once_with_nobody_connected_and_its_card_is_there(user, settings):
    settings.BUDDY_LLM = "offline"
    schedule = schedule_create(user=user, text=CARD, at=timezone.now() - timedelta(seconds=1))
    assert schedules_run_due() == 1
    assert schedules_run_due() == 0
    session = Session.objects.get(user=user)  # the schedule created the chat
    assert [e["title"] for e in CanvasState.objects.get(session=session).elements] == ["Good morning"]
    assert Message.objects.filter(session=session, is_turn_start=True).count() == 1
    schedule.refresh_from_db()
    assert schedule.next_run_at is None and not schedule.enabled
    assert ScheduledRun.objects.get().status == "done"

    from canvas.selectors import canvas_replay

    replay = canvas_replay(session=session)
    assert replay[0].params == {"mode": "clear"}
    assert replay[1].command == "canvas_add_card" and replay[1].params["title"] == "Good morning"


@pytest.mark.django_db
def test_a_schedule_not_yet_due_does_not_run(user):
    schedule_create(user=user, text="later", at=timezone.now() + timedelta(hours=1))
    assert schedule_claim_due() == []


@pytest.mark.django_db
def test_missed_times_run_once_after_a_restart_not_once_per_slot(user, settings):
    settings.BUDDY_LLM = "offline"
    now = timezone.now()
    schedule = schedule_create(
        user=user, text="hourly check", at=now - timedelta(hours=5, minutes=30), every_seconds=3600
    )
    runs = schedule_claim_due(now=now)
    assert len(runs) == 1
    schedule.refresh_from_db()
    assert now < schedule.next_run_at <= now + timedelta(hours=1)
    assert schedule.enabled
    assert schedule_claim_due(now=now) == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_run_the_same_due_time_twice(user, settings):
    settings.BUDDY_LLM = "offline"
    for i in range(5):
        schedule_create(
            user=user, text=f"job {i}", chat=ChatRef(chat_id=f"c{i}"), at=timezone.now() - timedelta(seconds=5)
        )
    claimed: list[int] = []
    barrier = threading.Barrier(4)

    def worker():
        barrier.wait()
        try:
            for run in schedule_claim_due():
                claimed.append(run.pk)
                scheduled_run_execute(run_id=run.pk)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(claimed) == len(set(claimed)) == 5
    assert ScheduledRun.objects.count() == 5
    assert Message.objects.filter(role="user").count() == 5
    assert set(ScheduledRun.objects.values_list("status", flat=True)) == {"done"}


@pytest.mark.django_db
def test_a_redelivered_run_finishes_its_turn_without_a_second_prompt(user, settings):
    settings.BUDDY_LLM = "offline"
    schedule = schedule_create(user=user, text="resume me", at=timezone.now() - timedelta(seconds=1))
    [run] = schedule_claim_due()
    # The first worker archived the prompt and died before the model answered.
    session = session_get_or_create(user=user, agent_slug=None, chat_id=None)
    prompt = message_append(session=session, role="user", content=schedule.text)
    ScheduledRun.objects.filter(pk=run.pk).update(prompt=prompt)
    assert scheduled_run_execute(run_id=run.pk) == "done"
    assert scheduled_run_execute(run_id=run.pk) == "done"  # a third delivery changes nothing
    roles = list(Message.objects.order_by("id").values_list("role", flat=True))
    assert roles == ["user", "assistant"]


@pytest.mark.django_db(transaction=True)
def test_the_model_schedules_a_prompt_with_its_tool(fake_anthropic, session):
    from agent.turn import turn_run

    fake_anthropic.queue_tool_call(
        "schedule_prompt", {"text": "Remind me to stretch", "at": "2030-01-01T08:00:00Z", "every_seconds": 86400}
    )
    fake_anthropic.queue_text("I will remind you every morning at 8.")
    turn_run(session=session, text="remind me every morning at 8 to stretch")
    schedule = ScheduledPrompt.objects.get()
    assert (schedule.text, schedule.every_seconds, schedule.chat_id) == ("Remind me to stretch", 86400, "main")
    assert schedule.next_run_at.isoformat() == "2030-01-01T08:00:00+00:00"
    result = Message.objects.order_by("id")[2].content[0]
    assert "Scheduled" in result["content"] and "is_error" not in result
    assert "schedule_prompt" in json.dumps(fake_anthropic.requests[0]["body"]["tools"])


@pytest.mark.django_db(transaction=True)
def test_a_bad_schedule_from_the_model_is_an_error_result(fake_anthropic, session):
    from agent.turn import turn_run

    fake_anthropic.queue_tool_call("schedule_prompt", {"text": "x", "every_seconds": 5})
    turn_run(session=session, text="spam me")
    result = Message.objects.order_by("id")[2].content[0]
    assert result["is_error"] is True and "at least 60" in result["content"]
    assert not ScheduledPrompt.objects.exists()


@pytest.mark.django_db
def test_schedule_prompt_command(user):
    out = io.StringIO()
    call_command("schedule_prompt", "Water the plants", "--user", "alice", "--every", "3600", stdout=out)
    assert "Scheduled #" in out.getvalue()
    assert ScheduledPrompt.objects.get().every_seconds == 3600
    with pytest.raises(CommandError, match="--at, --every"):
        call_command("schedule_prompt", "x", "--user", "alice")
    with pytest.raises(CommandError, match="ISO-8601"):
        call_command("schedule_prompt", "x", "--user", "alice", "--at", "tomorrow")
    with pytest.raises(CommandError, match="No agent"):
        call_command("schedule_prompt", "x", "--user", "alice", "--agent", "ghost", "--every", "60")


def test_check_deploy_passes_with_production_settings():
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_DEBUG": "0",
        "DJANGO_HTTPS": "1",
        "DJANGO_SECRET_KEY": "k3y-" + "".join(chr(97 + (i * 7) % 26) for i in range(60)),
        "DJANGO_ALLOWED_HOSTS": "buddy.example.com",
        "BUDDY_VAR_DIR": str(ROOT / "var"),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tool_input", "reason"),
    [
        ({"text": "x", "at": "2026-02-30T08:00:00Z"}, "not a real date-time"),
        ({"text": "x", "at": "0000-01-01T00:00:00Z"}, "not a real date-time"),
        ({"text": "x", "at": "9999-12-31T23:00:00-05:00"}, "not a real date-time"),
        ({"text": "x", "at": "2999-01-01T00:00:00Z"}, "within the next ten years"),
        ({"text": "x", "every_seconds": 10**30}, "at most 316224000"),
        ({"text": "x", "every_seconds": 1e30}, "at most 316224000"),
        ({"text": "x" * 5000, "every_seconds": 3600}, "at most 4000 characters"),
    ],
)
def test_impossible_times_intervals_and_texts_from_the_model_are_error_results(
    fake_anthropic, session, tool_input, reason
):
    from agent.turn import turn_run

    fake_anthropic.queue_tool_call("schedule_prompt", tool_input)
    turn_run(session=session, text="schedule it")
    result = Message.objects.order_by("id")[2].content[0]
    assert result["is_error"] is True and reason in result["content"], result
    assert not ScheduledPrompt.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_one_turn_makes_at_most_the_schedules_per_turn_limit(fake_anthropic, session, settings):
    from agent.turn import turn_run

    settings.BUDDY_SCHEDULES_PER_TURN = 3
    calls = [
        {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "schedule_prompt",
            "input": {"text": f"n{i}", "every_seconds": 60},
        }
        for i in range(20)  # fewer than one response's tool calls (BUDDY_MAX_TOOL_CALLS)
    ]
    fake_anthropic.queue_reply(calls)
    fake_anthropic.queue_text("done")
    turn_run(session=session, text="remind me of 20 things every minute")
    assert ScheduledPrompt.objects.count() == 3
    results = Message.objects.order_by("id")[2].content
    assert sum(1 for r in results if r.get("is_error")) == 17
    assert "the most one turn may make" in results[-1]["content"]
    fake_anthropic.queue_tool_call("schedule_prompt", {"text": "next turn", "every_seconds": 60})
    turn_run(session=session, text="one more")  # a new turn has its own allowance
    assert ScheduledPrompt.objects.count() == 4


@pytest.mark.django_db
def test_a_user_has_at_most_the_schedules_per_user_limit(user, settings):
    settings.BUDDY_SCHEDULES_PER_USER = 2
    for text in ("a", "b"):
        schedule_create(user=user, text=text, every_seconds=60)
    with pytest.raises(ScheduleError, match="already 2 active schedules"):
        schedule_create(user=user, text="c", every_seconds=60)


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["x\ud800y", "a\x00b"])
def test_schedule_text_that_is_not_valid_unicode_or_holds_nul_is_refused(user, text):
    with pytest.raises(ScheduleError, match="NUL|not valid Unicode"):
        schedule_create(user=user, text=text, every_seconds=60)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--at", "2026-02-30T08:00:00Z"], "not a real date-time"),
        (["--at", "0000-01-01T00:00:00Z"], "not a real date-time"),
        (["--at", "9999-12-31T23:00:00-05:00"], "not a real date-time"),
        (["--every", str(10**20)], "at most 316224000"),
    ],
)
def test_the_command_refuses_the_same_times_with_a_clear_error(user, args, reason):
    with pytest.raises(CommandError, match=reason):
        call_command("schedule_prompt", "x", "--user", "alice", *args)
    assert not ScheduledPrompt.objects.exists()


@pytest.mark.django_db
def test_a_deactivated_users_schedules_do_not_run(user, settings):
    settings.BUDDY_LLM = "offline"
    schedule_create(user=user, text="still here?", at=timezone.now() - timedelta(seconds=1))
    user.is_active = False
    user.save()
    assert schedules_run_due() == 0
    assert not Message.objects.exists()
    user.is_active = True
    user.save()
    assert schedules_run_due() == 1  # active again: the missed time runs once
    assert Message.objects.filter(role="user").count() == 1


@pytest.mark.django_db
def test_a_run_claimed_before_its_user_was_deactivated_does_not_run(user, settings):
    settings.BUDDY_LLM = "offline"
    schedule_create(user=user, text="still here?", at=timezone.now() - timedelta(seconds=1))
    [run] = schedule_claim_due()
    user.is_active = False
    user.save()
    assert scheduled_run_execute(run_id=run.pk) == "failed"
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_a_deactivated_users_schedules_stop_running(user, settings):
    settings.BUDDY_LLM = "offline"
    schedule_create(user=user, text="every minute", at=timezone.now() - timedelta(seconds=1), every_seconds=60)
    claimed = schedule_create(user=user, text="claimed already", at=timezone.now() - timedelta(seconds=1))
    [run] = [run for run in schedule_claim_due() if run.schedule_id == claimed.pk] or [None]
    ScheduledRun.objects.exclude(pk=run.pk).delete()
    ScheduledPrompt.objects.exclude(pk=claimed.pk).update(next_run_at=timezone.now() - timedelta(seconds=1))
    user.is_active = False
    user.save()
    assert schedule_claim_due() == []  # nothing of an inactive user is claimed
    assert scheduled_run_execute(run_id=run.pk) == "failed"  # nor run when claimed before
    assert not Message.objects.exists()
    user.is_active = True
    user.save()
    assert len(schedule_claim_due()) == 1  # active again: the recurring one runs


def test_schedule_prompt_at_a_past_time_says_it_runs_at_once(user):
    out, err = io.StringIO(), io.StringIO()
    late = (timezone.now() - timedelta(hours=1)).isoformat()  # within the day a missed time may be
    call_command("schedule_prompt", "Late", "--user", "alice", "--at", late, stdout=out, stderr=err)
    assert "in the past" in err.getvalue() and "runs at once" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    soon = (timezone.now() + timedelta(days=1)).isoformat()
    call_command("schedule_prompt", "Soon", "--user", "alice", "--at", soon, stdout=out, stderr=err)
    assert err.getvalue() == ""


def test_serve_hands_due_prompts_to_the_worker_every_second(user, settings, monkeypatch):
    from agent.management.commands import serve

    settings.BUDDY_LLM = "offline"
    monkeypatch.setattr(serve, "close_old_connections", lambda: None)  # the test's own connection stays open
    schedule_create(user=user, text=CARD, at=timezone.now())
    assert serve.SCHEDULE_CHECK_SECONDS <= 1
    assert serve.Command().run_due_schedules() == 1  # tasks run inline in the tests: the turn ran
    assert ScheduledRun.objects.get().status == ScheduledRun.Status.DONE
    assert serve.Command().run_due_schedules() == 0


def test_check_schedules_once_queues_what_is_due(user, settings, monkeypatch):
    from agent.management.commands import check_schedules

    settings.BUDDY_LLM = "offline"
    monkeypatch.setattr(check_schedules, "close_old_connections", lambda: None)
    schedule_create(user=user, text=CARD, at=timezone.now())
    out = io.StringIO()
    call_command("check_schedules", "--once", stdout=out)
    assert "queued 1 scheduled prompt(s)" in out.getvalue()
    assert ScheduledRun.objects.get().status == ScheduledRun.Status.DONE
