"""The search box over all chats (README: "Search all chats"): Ctrl-K focuses it, results show the
chat's title, agent, date and a snippet, and choosing one opens that chat at that message. The
screenshots docs/search.png and docs/search-390.png are taken here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.models import Session
from conversations.services import message_append, session_get_or_create

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs"


def chats_with_a_trip(user, scout_agent=None):
    """Three chats of `user`, the ferry to Naxos said in the oldest: (that chat, the message)."""
    start = datetime(2025, 3, 2, 9, tzinfo=UTC)

    def chat(chat_id, title, texts, agent="buddy", offset=0):
        session = session_get_or_create(user=user, agent_slug=agent, chat_id=chat_id)
        Session.objects.filter(pk=session.pk).update(title=title)
        said = []
        for index, text in enumerate(texts):
            role = "user" if index % 2 == 0 else "assistant"
            when = start + timedelta(days=offset, minutes=index)
            said.append(message_append(session=session, role=role, content=text, created_at=when))
        return session, said

    filler = [f"Line {number} about the weekly groceries and the bakery." for number in range(30)]
    trip, said = chat(
        "greece",
        "Summer in Greece",
        [
            "Can you find the ferry from Piraeus to Naxos in June?",
            "The ferry leaves Piraeus at 07:25 and reaches Naxos at 13:10.",
            *filler,
        ],
    )
    chat("house", "House and garden", ["The plumber comes on Tuesday about the boiler.", "Noted."], offset=20)
    if scout_agent is not None:
        chat("hikes", "Hikes", ["A ferry across the lake, then the ridge walk.", "Sounds good."], "scout", 25)
    chat("main", "Today", ["Hello!", "Hi, how can I help?"], offset=40)
    return trip, said[1]


def search_box(page):
    return page.get_by_role("search", name="Search everything")


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_search_finds_a_message_in_another_chat_and_opens_it_there(
    page, live_server_url, user, scout_agent, width, height
):
    from tests.browser.conftest import log_in

    trip, reply = chats_with_a_trip(user, scout_agent)
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.get_by_label("Message").wait_for()
    # The page opens on the newest chat; the ferry is in another one.
    assert "ferry" not in page.get_by_role("log", name="Conversation").inner_text().lower()

    page.keyboard.press("Control+k")
    field = page.get_by_role("searchbox", name="Search everything")
    assert page.evaluate("document.activeElement.id") == "chat-search"
    field.fill("ferry to Naxos")
    results = search_box(page).get_by_role("list", name="Results")
    first = results.get_by_role("link").first
    first.wait_for()
    text = first.inner_text()
    assert "Summer in Greece" in text and "Buddy" in text and "Mar 2, 2025" in text
    assert first.locator("mark").first.inner_text().lower() in {"ferry", "naxos"}
    assert search_box(page).get_by_text("Hikes", exact=True).count() >= 1  # another agent's chat is searched too
    assert search_box(page).get_by_role("status").inner_text().endswith("for “ferry to Naxos”.")
    if width == 1440:
        page.screenshot(path=str(DOCS / "search.png"))
    else:
        page.screenshot(path=str(DOCS / "search-390.png"))
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, "the page scrolls sideways at 390 px"

    # Keyboard: down from the field into the results, Escape back to the field.
    field.press("ArrowDown")
    assert page.evaluate("document.activeElement.classList.contains('chat-search-link')")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == "chat-search"
    assert not results.is_visible()

    field.press("ArrowDown")
    target = results.get_by_role("link").filter(has_text="07:25").first
    target.click()
    page.wait_for_url(f"**around={reply.id}**")
    page.locator(f'#conversation [data-message-id="{reply.id}"].is-linked').wait_for()
    assert f"chat_id={trip.chat_id}" in page.url
    current = page.locator("#chat-list [aria-current=page]")  # in the drawer at 390 px
    assert "Summer in Greece" in current.text_content()


def test_search_says_when_nothing_is_found_and_never_shows_another_users_chat(page, live_server_url, user, other_user):
    from tests.browser.conftest import log_in

    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="bobs")
    message_append(session=theirs, role="user", content="The zeppelin hangar code is 4417.")
    chats_with_a_trip(user)
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.get_by_label("Message").wait_for()
    page.keyboard.press("Control+k")
    page.get_by_role("searchbox", name="Search everything").fill("zeppelin hangar")
    status = search_box(page).get_by_role("status")
    status.filter(has_text="Nothing found").wait_for()
    assert search_box(page).get_by_role("link").count() == 0
