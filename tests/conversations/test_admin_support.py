"""Staff support in the admin: sessions found by title, user or chat id; a session's page shows the
chat's memory notes with their versions and its usage; each model call links to the messages of the turn
it served; costs in money where BUDDY_PRICES prices the model, in tokens otherwise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from urllib.parse import unquote

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.urls import reverse

from agent.submit import prompt_submit
from conversations.models import Message, ModelCall
from conversations.prices import PricesInvalid, price_for, prices_parse
from conversations.services import message_append, session_get_or_create
from devtools.servers import free_port
from memory.notes.services import note_delete, note_put

pytestmark = pytest.mark.django_db

PRICES = "buddy-offline-demo=3,15,0.3,3.75;claude-haiku-5-5=1,5,0.1,1.25,2"


def page(client, name: str, *args, **query) -> str:
    response = client.get(reverse(f"admin:{name}", args=args), query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_sessions_are_found_by_title_user_name_or_chat_id(client, staff_user, user, other_user, agent):
    lisbon = session_get_or_create(user=user, agent_slug="buddy", chat_id="trip")
    lisbon.title = "Planning Lisbon in May"
    lisbon.save()
    other = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="work")
    other.title = "Quarterly numbers"
    other.save()
    client.force_login(staff_user)
    found = page(client, "conversations_session_changelist", q="lisbon")
    assert "Planning Lisbon in May" in found and "Quarterly numbers" not in found
    assert "Quarterly numbers" in page(client, "conversations_session_changelist", q="bob")
    assert "Planning Lisbon in May" not in page(client, "conversations_session_changelist", q="work")
    listing = page(client, "conversations_session_changelist")
    assert re.search(r'<th[^>]*class="[^"]*column-title', listing)  # the title is a column


@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("conversations_message_changelist", "role=%00"),
        ("conversations_message_changelist", "role__exact=a%00b"),
        ("conversations_session_changelist", "created_at__year=99999"),
        ("conversations_agent_changelist", "created_at__year=-3"),
        ("agent_scheduledprompt_changelist", "created_at__year=99999"),
        ("auth_user_changelist", "date_joined__year=123456"),
    ],
)
def test_a_list_filter_the_database_cannot_run_shows_the_list_without_filters(client, staff_user, session, name, query):
    """As Django's admin answers a filter it refuses (`?e=1`), never a server error; on SQLite a NUL is
    a value like any other, and finds nothing."""
    client.force_login(staff_user)
    url = reverse(f"admin:{name}")
    response = client.get(f"{url}?{query}")
    assert response.status_code in {200, 302}, response.status_code
    if response.status_code == 302:
        assert response["Location"] == f"{url}?e=1"
        assert client.get(response["Location"]).status_code == 200


def test_a_sessions_page_shows_the_chats_notes_with_their_versions(client, staff_user, user, session):
    source = message_append(session=session, role="assistant", content="noted")
    note_put(
        user=user, session=session, path="/memories/trip.md", content="Lisbon <b>May</b>", by="model", source=source
    )
    note_put(user=user, session=session, path="/memories/trip.md", content="Lisbon in May", by="model", source=source)
    note_put(user=user, session=session, path="/memories/gone.md", content="gone")
    note_delete(user=user, session=session, path="/memories/gone.md")
    note_put(user=user, session=None, path="/memories/profile/tea.md", content="green tea")
    elsewhere = session_get_or_create(user=user, agent_slug="buddy", chat_id="elsewhere")
    note_put(user=user, session=elsewhere, path="/memories/other.md", content="another chat's note")
    client.force_login(staff_user)
    detail = page(client, "conversations_session_change", session.pk)
    notes = detail[detail.index('class="buddy-notes"') :]
    assert "/memories/trip.md" in notes and "Lisbon in May" in notes
    assert "another chat&#x27;s note" not in detail and "/memories/gone.md" not in notes.split("</table>")[0]
    assert f'href="{reverse("admin:conversations_message_change", args=[source.pk])}">#{source.pk}</a>' in notes
    versions_url = re.search(r'<a href="([^"]+)">versions</a>', notes).group(1).replace("&amp;", "&")
    versions = client.get(versions_url).content.decode()
    assert unquote(versions_url).endswith(f"session__id__exact={session.pk}&path=/memories/trip.md")
    assert versions.count('class="field-path"') == 2
    every = re.search(r'<a href="([^"]+)">every version of this chat', notes).group(1).replace("&amp;", "&")
    assert client.get(every).content.decode().count('class="field-path"') == 4  # the deleted note's too
    assert "1 profile notes of alice" in notes
    assert 'name="content"' not in detail  # read-only


def test_each_model_call_links_to_the_messages_of_its_turn(client, staff_user, user, agent):
    first = prompt_submit(user=user, text='CANVAS: [{"name": "canvas_add_card", "input": {"id": "a", "title": "A"}}]')
    prompt_submit(user=user, text="and another turn")
    calls = list(ModelCall.objects.order_by("id"))
    first_prompt = Message.objects.get(pk=first.message_id).session.messages.order_by("id").first()
    assert [call.prompt_message_id for call in calls[:2]] == [first_prompt.pk] * 2
    assert calls[2].prompt_message_id > first_prompt.pk
    client.force_login(staff_user)
    listing = page(client, "conversations_modelcall_changelist")
    turn_url = f"{reverse('admin:conversations_message_changelist')}?turn={first_prompt.pk}"
    assert listing.count(f'href="{turn_url}"') == 2
    turn = client.get(turn_url).content.decode()
    shown = [int(pk) for pk in re.findall(r"/admin/conversations/message/(\d+)/change/", turn)]
    assert sorted(set(shown)) == [first_prompt.pk + offset for offset in range(4)]  # prompt, call, result, reply
    assert "and another turn" not in turn
    call_page = page(client, "conversations_modelcall_change", calls[0].pk)
    assert f'href="{turn_url}"' in call_page
    assert "/change/" not in page(client, "conversations_message_changelist", turn="x")  # no such turn: nothing


def test_costs_are_in_money_with_prices_and_in_tokens_without(client, staff_user, user, session, settings):
    ModelCall.objects.create(
        session=session,
        model="buddy-offline-demo",
        input_tokens=1_000,
        output_tokens=2_000,
        cache_read_input_tokens=100_000,
        cache_creation_input_tokens=30_000,
        cache_creation_5m_input_tokens=10_000,
        cache_creation_1h_input_tokens=20_000,
    )
    ModelCall.objects.create(session=session, model="unknown-model", input_tokens=5, output_tokens=5)
    call = ModelCall.objects.order_by("id").first()
    client.force_login(staff_user)

    detail = page(client, "conversations_session_change", session.pk)
    assert "2 model calls: 1,005 uncached input, 100,000 cache read, 10,000 + 20,000 cache written" in detail
    assert "2,005 output tokens" in detail and "$" not in detail
    assert "in tokens (BUDDY_PRICES is not set)" in page(client, "conversations_modelcall_change", call.pk)
    assert api_cost(client, user) is None

    settings.BUDDY_PRICES = PRICES
    # 1,000 × 3 + 2,000 × 15 + 100,000 × 0.3 + 10,000 × 3.75 + 20,000 × 6 (1 h: 2 × input) = 220,500 per million
    assert "$0.2205" in page(client, "conversations_modelcall_change", call.pk)
    assert "cost $0.2205 (1 calls of models BUDDY_PRICES does not price left out)" in page(
        client, "conversations_session_change", session.pk
    )
    listing = page(client, "conversations_modelcall_changelist")
    assert "$0.2205" in listing and "not priced (BUDDY_PRICES)" in listing
    assert api_cost(client, user) == {"amount": pytest.approx(0.2205), "unpriced_calls": 1}


def api_cost(client, user):
    """`cost` of /memory/stats, asked by the chat's own user."""
    own = Client()
    own.force_login(user)
    return own.get("/memory/stats").json()["cost"]


def test_prices_are_read_as_documented():
    prices = prices_parse(" buddy-offline-demo = 3, 15, 0.3, 3.75 ; claude-haiku-5-5=1,5,0.1,1.25,2; ")
    assert prices["buddy-offline-demo"].cache_write_1h == 6  # as the provider prices 1-hour writes: 2 × input
    assert prices["claude-haiku-5-5"].cache_write_1h == 2
    assert prices_parse("") == {}


def test_a_dated_snapshot_is_priced_by_its_models_name(settings):
    settings.BUDDY_PRICES = "claude-sonnet-5-5=3,15,0.3,3.75;claude-sonnet-5=1,1,1,1"
    assert price_for("claude-sonnet-5-5-20261001").input == 3
    assert price_for("claude-sonnet-5-20261001").input == 1
    assert price_for("claude-sonnet-5-50") is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("claude-sonnet-5-5=3,15,0.3", "expected 4 prices"),
        ("claude-sonnet-5-5=3,15,x,3.75", "must be a number"),
        ("claude-sonnet-5-5=3,15,-1,3.75", "at least 0"),
        ("claude-sonnet-5-5=3,15,nan,3.75", "finite"),
        ("claude-sonnet-5-5 3,15,0.3,3.75", "expected MODEL="),
        ("a=1,1,1,1;a=2,2,2,2", "priced twice"),
    ],
)
def test_bad_prices_stop_the_start_with_a_clear_error(settings, value, why):
    with pytest.raises(PricesInvalid, match=why):
        prices_parse(value)
    settings.BUDDY_PRICES = value
    with pytest.raises(SystemCheckError, match=r"conversations\.E001.*BUDDY_PRICES cannot be read"):
        call_command("check")


def test_a_server_process_does_not_start_with_prices_it_cannot_read(settings):
    """daphne runs no system checks: the application itself refuses to start, saying why, instead of
    serving pages that fail on the prices later."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "BUDDY_PRICES": "claude-sonnet-5-5=3,15"}
    argv = [sys.executable, "-m", "buddy.server", "-b", "127.0.0.1", "-p", str(free_port()), "buddy.asgi:application"]
    done = subprocess.run(argv, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "conversations.E001: BUDDY_PRICES cannot be read" in done.stderr + done.stdout
