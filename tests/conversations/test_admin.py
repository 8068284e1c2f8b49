from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.models import Message, ModelCall
from conversations.services import message_append

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(session):
    message_append(session=session, role="user", content="Please <b>remember</b> the pricing plan")
    message_append(
        session=session,
        role="assistant",
        content=[
            {"type": "tool_use", "id": "toolu_9", "name": "canvas_add_card", "input": {"id": "p", "title": "Plan"}}
        ],
    )
    message_append(
        session=session, role="user", content=[{"type": "tool_result", "tool_use_id": "toolu_9", "content": "added"}]
    )
    return session


def test_staff_see_sessions_with_counts_and_readable_messages(client, staff_user, archived):
    client.force_login(staff_user)
    page = client.get(reverse("admin:conversations_session_changelist")).content.decode()
    assert "view messages" in page and ">3<" in page
    listing = client.get(reverse("admin:conversations_message_changelist"), {"q": "pricing"}).content.decode()
    assert "remember" in listing
    message = Message.objects.filter(role="assistant").get()
    detail = client.get(reverse("admin:conversations_message_change", args=[message.pk])).content.decode()
    assert "tool call" in detail and "canvas_add_card" in detail
    first = Message.objects.order_by("id").first()
    detail = client.get(reverse("admin:conversations_message_change", args=[first.pk])).content.decode()
    assert "&lt;b&gt;remember&lt;/b&gt;" in detail  # shown as text, never as HTML


def test_archived_messages_are_read_only_in_the_admin(client, staff_user, archived):
    client.force_login(staff_user)
    message = Message.objects.first()
    detail = client.get(reverse("admin:conversations_message_change", args=[message.pk])).content.decode()
    assert 'name="_save"' not in detail
    assert (
        client.post(reverse("admin:conversations_message_change", args=[message.pk]), {"role": "assistant"}).status_code
        == 403
    )
    assert (
        client.post(reverse("admin:conversations_message_delete", args=[message.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert client.get(reverse("admin:conversations_message_add")).status_code == 403
    message.refresh_from_db()
    assert message.role == "user" and Message.objects.count() == 3


def test_every_admin_page_renders_for_staff(client, staff_user, archived):
    client.force_login(staff_user)
    for name in [
        "conversations_agent",
        "conversations_session",
        "conversations_message",
        "conversations_modelcall",
        "conversations_apitoken",
        "memory_summary",
        "canvas_canvasstate",
    ]:
        assert client.get(reverse(f"admin:{name}_changelist")).status_code == 200, name


def test_non_staff_cannot_reach_the_admin(client, user, archived):
    client.force_login(user)
    response = client.get(reverse("admin:conversations_message_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_see_what_the_prompt_cache_costs_per_lifetime(client, staff_user, session):
    ModelCall.objects.create(
        session=session,
        model="m",
        input_tokens=100,
        cache_read_input_tokens=20_000,
        cache_creation_input_tokens=3_000,
        cache_creation_5m_input_tokens=1_000,
        cache_creation_1h_input_tokens=2_000,
    )
    client.force_login(staff_user)

    detail = client.get(reverse("admin:conversations_session_change", args=[session.pk])).content.decode()
    calls = client.get(reverse("admin:conversations_modelcall_changelist")).content.decode()

    # 100 + 1.25 × 1,000 + 2 × 2,000 + 0.1 × 20,000 = 7,350 base input tokens, 32 % of 23,100 uncached.
    assert "read 20,000" in detail and "5-minute lifetime 1,000" in detail and "1-hour lifetime 2,000" in detail
    assert "input cost 7,350 base input tokens (32%" in detail
    assert "7,350" in calls and "5m input tokens" in calls and "1h input tokens" in calls
