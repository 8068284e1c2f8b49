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
    assert "Writes 5m/1h" in calls and "1000/2000" in calls
    call = ModelCall.objects.get()
    assert "7,350" in client.get(reverse("admin:conversations_modelcall_change", args=[call.pk])).content.decode()


def test_model_calls_name_the_model_that_answered_with_its_input_tokens(client, staff_user, user, agent, settings):
    from agent.submit import prompt_submit
    from conversations.models import ModelCall

    settings.BUDDY_LLM = "offline"
    prompt_submit(user=user, text='CANVAS: [{"name": "canvas_add_card", "input": {"id": "a", "title": "A"}}]')
    prompt_submit(user=user, text="hello")
    calls = list(ModelCall.objects.order_by("id"))
    assert len(calls) == 3
    assert {call.model for call in calls} == {"buddy-offline-demo"}
    assert all(call.input_tokens > 0 for call in calls)
    client.force_login(staff_user)
    listing = client.get(reverse("admin:conversations_modelcall_changelist")).content.decode()
    assert "buddy-offline-demo" in listing and settings.BUDDY_MODEL not in listing


def test_model_calls_record_the_model_the_provider_says_answered(user, agent, fake_anthropic, settings):
    from agent.submit import prompt_submit
    from conversations.models import ModelCall

    fake_anthropic.queue_text("Hi there")
    prompt_submit(user=user, text="hello")
    call = ModelCall.objects.get()
    assert call.model == settings.BUDDY_MODEL and call.input_tokens > 0


def test_a_sessions_page_reads_as_a_transcript_with_links(client, staff_user, archived):
    from canvas.services import canvas_apply
    from conversations.models import ModelCall

    canvas_apply(session=archived, command="canvas_add_card", params={"id": "p", "title": "Plan"})
    ModelCall.objects.create(session=archived, model="buddy-offline-demo", input_tokens=5)
    client.force_login(staff_user)
    page = client.get(reverse("admin:conversations_session_change", args=[archived.pk])).content.decode()
    first, call, result = Message.objects.order_by("id")
    # Every message, in order, with what kind of message it is, linked to its own page.
    assert page.index("Please &lt;b&gt;remember&lt;/b&gt; the pricing plan") < page.index("canvas_add_card")
    assert page.index("canvas_add_card") < page.index("added")
    for message in (first, call, result):
        assert reverse("admin:conversations_message_change", args=[message.pk]) in page
    assert "<strong>tool results</strong>" in page and "<strong>tool call</strong>" in page
    assert f"?session__id__exact={archived.pk}" in page
    assert reverse("admin:canvas_canvasstate_change", args=[archived.pk]) in page
    assert "1 model calls" in page and "all 3 messages" in page


def test_the_message_list_tells_tool_results_from_prompts(client, staff_user, archived):
    client.force_login(staff_user)
    listing = client.get(reverse("admin:conversations_message_changelist")).content.decode()
    assert '<td class="field-kind">tool results</td>' in listing
    assert '<td class="field-kind">user</td>' in listing
    assert "canvas_add_card(id=&quot;p&quot;, title=&quot;Plan&quot;)" in listing
    assert "→ added" in listing


def test_the_admin_says_canvases(client, staff_user):
    client.force_login(staff_user)
    index = client.get(reverse("admin:index")).content.decode()
    assert "Canvases" in index and "Canvass" not in index
