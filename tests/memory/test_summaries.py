"""Rolling summaries through the fake Messages API: facts kept, one job at a time, retries, no gaps."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone
from django_q.models import Schedule

from agent.tasks import summary_update
from agent.turn import turn_run
from conversations.models import Message, ModelCall, Session
from memory import summaries as memory_summaries
from memory.models import Summary, SummaryLease

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY_MARK = "long-term memory"


@pytest.fixture
def small_window(settings, fake_anthropic):
    settings.BUDDY_SUMMARIES = True
    settings.BUDDY_CONTEXT_TOKENS = 3000
    settings.BUDDY_MAX_PROMPT_TOKENS = 700
    settings.BUDDY_WINDOW_LOW_WATER = 0.5
    settings.BUDDY_LLM_RETRIES = 0
    return fake_anthropic


def is_summary_call(request) -> bool:
    """For a recorded request ({"body": ...}) or the body a responder is given."""
    body = request.get("body", request)
    return SUMMARY_MARK in str(body.get("system", ""))


def chat(session, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        turn_run(session=session, text=f"Turn {i}: " + "some ordinary chatter about the weather " * 16)


def test_a_summary_covers_the_facts_the_step_dropped(small_window, session):
    turn_run(session=session, text="My name is Diego and I decided the Pro plan costs 12 EUR.")
    first_id = Message.objects.order_by("id").first().id
    chat(session, 12)
    session.refresh_from_db()
    assert session.window_start_id > first_id  # the window stepped past the facts
    summary = Summary.objects.filter(session=session).order_by("-through_message_id").first()
    assert summary is not None and summary.through_message_id >= first_id
    assert "Diego" in summary.text and "12 EUR" in summary.text
    assert ModelCall.objects.filter(kind="summary", error="").exists()
    # The next chat call carries the summary in its system prompt, though the facts left the window.
    turn_run(session=session, text="What is my name?")
    chat_request = [r for r in small_window.requests if not is_summary_call(r)][-1]
    system = chat_request["body"]["system"][0]["text"]
    assert "Previous conversation summary" in system and "Diego" in system
    assert "Diego" not in str(chat_request["body"]["messages"])


def test_summaries_are_written_ahead_of_the_step(small_window, session, settings):
    from conversations.window import window_next_step

    settings.BUDDY_SUMMARIES = False
    turns = 0
    while window_next_step(session=session).tokens_until_step > 0.15 * settings.BUDDY_CONTEXT_TOKENS:
        chat(session, 1, start=turns)
        turns += 1
    settings.BUDDY_SUMMARIES = True
    before = Session.objects.get(pk=session.pk).window_start_id
    summary_update(session.pk)
    summary = Summary.objects.get(session=session)
    assert Session.objects.get(pk=session.pk).window_start_id == before  # no step happened yet…
    assert summary.through_message_id >= before  # …but what the next step drops is already covered


def test_one_summary_job_at_a_time_per_session(small_window, session, settings):
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    settings.BUDDY_SUMMARIES = True

    def slow(request):
        if is_summary_call(request):
            time.sleep(1.0)
        return None

    small_window.responder = slow
    outcomes = []

    def job():
        try:
            outcomes.append(summary_update(session.pk))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=job) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes).count("busy") == 2
    assert ModelCall.objects.filter(kind="summary").count() == Summary.objects.count() >= 1
    assert not SummaryLease.objects.exists()  # released by the job that held it


def test_a_failed_summary_call_is_retried(small_window, session, settings):
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    settings.BUDDY_SUMMARIES = True
    small_window.fail_next(500, times=1)
    assert summary_update(session.pk) == "retrying"
    assert not Summary.objects.exists()
    retry = Schedule.objects.get(func="agent.tasks.summary_update")
    assert retry.args == f"{session.pk},2" and retry.next_run > timezone.now()
    assert summary_update(session.pk, 2) == "up to date"
    assert Summary.objects.exists()
    assert ModelCall.objects.filter(kind="summary").exclude(error="").count() == 1


def test_a_summary_call_that_times_out_is_retried_too(small_window, session, settings):
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    settings.BUDDY_SUMMARIES, settings.BUDDY_LLM_TIMEOUT = True, 0.5
    small_window.hang_next(2)
    assert summary_update(session.pk) == "retrying"
    assert ModelCall.objects.filter(kind="summary").exclude(error="").count() == 1


def test_nothing_is_skipped_after_a_killed_worker(small_window, session, settings):
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    settings.BUDDY_SUMMARIES = True
    # A worker took the lease and died: its lease expires, and the next job starts at message one.
    SummaryLease.objects.create(session=session, expires_at=timezone.now() - timedelta(seconds=1))
    assert summary_update(session.pk) == "up to date"
    assert not SummaryLease.objects.exists()
    summary_requests = [r for r in small_window.requests if is_summary_call(r)]
    first = Message.objects.order_by("id").first()
    assert f"[#{first.id} " in str(summary_requests[0]["body"]["messages"])
    # Every summary continues exactly where the previous one ended.
    covered = list(Summary.objects.order_by("through_message_id").values_list("through_message_id", flat=True))
    for request, previous_end in zip(summary_requests[1:], covered, strict=False):
        next_id = Message.objects.filter(session=session, id__gt=previous_end).order_by("id").first().id
        assert f"[#{next_id} " in str(request["body"]["messages"])


def test_summaries_off_writes_none(small_window, session, settings):
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    assert summary_update(session.pk) == "disabled"
    assert not Summary.objects.exists()


def test_memory_writes_the_summary_with_whatever_model_it_is_handed(small_window, session, settings):
    """The summary model comes from above (agent.tasks): memory folds with any `summarise`, lets its
    failure through with the lease free and nothing written, and keeps what it returns."""
    settings.BUDDY_SUMMARIES = False
    chat(session, 12)
    settings.BUDDY_SUMMARIES = True
    asked = []

    class Down(Exception):
        pass

    def failing(**request):
        asked.append(request)
        raise Down("no model today")

    with pytest.raises(Down):
        memory_summaries.summary_update(session_id=session.pk, summarise=failing)
    assert not Summary.objects.exists() and not SummaryLease.objects.exists()
    first = Message.objects.order_by("id").first()
    assert asked[0]["session"] == session and f"[#{first.id} " in asked[0]["prompt"]
    assert asked[0]["max_tokens"] == settings.BUDDY_SUMMARY_TOKENS

    def writer(**request):
        return "  The user talked about the weather.  "

    assert memory_summaries.summary_update(session_id=session.pk, summarise=writer) == "up to date"
    assert set(Summary.objects.values_list("text", flat=True)) == {"The user talked about the weather."}
    assert not ModelCall.objects.filter(kind="summary").exists()  # recording calls is the caller's part
