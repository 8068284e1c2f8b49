"""The admin holds scheduled prompts to the caps every other way of making one does (README, Limits)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent.models import ScheduledPrompt
from agent.schedules import schedule_create

pytestmark = pytest.mark.django_db


def _form(user, agent, **fields):
    data = {
        "user": user.pk,
        "agent": agent.pk,
        "chat_id": "main",
        "text": "water the plants",
        "next_run_at_0": "2030-01-01",
        "next_run_at_1": "08:00:00",
        "every_seconds": "3600",
        "enabled": "on",
        "runs-TOTAL_FORMS": "0",
        "runs-INITIAL_FORMS": "0",
        "runs-MIN_NUM_FORMS": "0",
        "runs-MAX_NUM_FORMS": "1000",
    }
    data.update(fields)
    return {key: value for key, value in data.items() if value is not None}


def test_the_admin_refuses_a_schedule_past_the_per_user_cap(client, staff_user, user, agent, settings):
    settings.BUDDY_SCHEDULES_PER_USER = 2
    for text in ("a", "b"):
        schedule_create(user=user, text=text, every_seconds=60)
    client.force_login(staff_user)
    page = client.post(reverse("admin:agent_scheduledprompt_add"), _form(user, agent))
    assert page.status_code == 200  # the form again, with the reason
    assert "already 2 active schedules" in page.content.decode()
    assert ScheduledPrompt.objects.count() == 2
    # A disabled one does not count, and an active one may be edited without counting against itself.
    page = client.post(reverse("admin:agent_scheduledprompt_add"), _form(user, agent, enabled=None))
    assert page.status_code == 302
    active = ScheduledPrompt.objects.filter(enabled=True).first()
    page = client.post(
        reverse("admin:agent_scheduledprompt_change", args=[active.pk]), _form(user, agent, text="edited")
    )
    assert page.status_code == 302
    active.refresh_from_db()
    assert active.text == "edited"
    # Enabling the disabled one would make three.
    disabled = ScheduledPrompt.objects.get(enabled=False)
    page = client.post(reverse("admin:agent_scheduledprompt_change", args=[disabled.pk]), _form(user, agent))
    assert "already 2 active schedules" in page.content.decode()
    assert ScheduledPrompt.objects.filter(enabled=True).count() == 2


@pytest.mark.parametrize(
    ("text", "reason"),
    [("x" * 10_000, "at most 4000 characters"), ("a\x00b", "Null characters"), ("   ", "This field is required")],
)
def test_the_admin_refuses_a_text_the_other_ways_refuse(client, staff_user, user, agent, text, reason):
    client.force_login(staff_user)
    page = client.post(reverse("admin:agent_scheduledprompt_add"), _form(user, agent, text=text))
    assert page.status_code == 200
    assert reason in page.content.decode()  # Django's own field refuses NUL before the schedule rules
    assert not ScheduledPrompt.objects.exists()


def test_the_admin_refuses_an_interval_over_ten_years(client, staff_user, user, agent):
    client.force_login(staff_user)
    page = client.post(reverse("admin:agent_scheduledprompt_add"), _form(user, agent, every_seconds="999999999999"))
    assert page.status_code == 200
    assert not ScheduledPrompt.objects.exists()


def test_a_schedule_within_the_caps_is_saved_from_the_admin(client, staff_user, user, agent):
    client.force_login(staff_user)
    page = client.post(reverse("admin:agent_scheduledprompt_add"), _form(user, agent, text="  x" * 100))
    assert page.status_code == 302
    assert ScheduledPrompt.objects.get().text == ("  x" * 100).strip()
