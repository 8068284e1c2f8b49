"""The chat list in chromium, at 1440×900 (a sidebar) and 390×844 (a drawer): every chat with its title,
rename, delete after a confirmation, export as a download, a chat deleted in one tab gone from the other
tab's list, the agent and chat kept across a reload, and a prompt sent from a page opened at an older
message showing every message. Screenshots in docs/chats.png and docs/chats-390.png."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conversations.models import Agent, Message, Session
from conversations.services import message_append, session_get_or_create, session_rename
from tests.browser.test_e2e import log, send_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}


def chats(page):
    return page.get_by_role("navigation", name="Chats")


def open_list(page, size: str) -> None:
    """On a phone the list is a drawer behind the Chats button."""
    if size == "phone" and not chats(page).is_visible():
        page.get_by_role("button", name="Chats").click()
    chats(page).get_by_role("list").wait_for()


def chat_with(user, agent_slug: str, chat_id: str, title: str, *texts: str) -> Session:
    session = session_get_or_create(user=user, agent_slug=agent_slug, chat_id=chat_id)
    for index, text in enumerate(texts):
        message_append(session=session, role="user" if index % 2 == 0 else "assistant", content=text)
    if title:
        session_rename(session=session, title=title)
    return session


@pytest.fixture
def three_chats(live_server_url, user, scout_agent):
    chat_with(user, "buddy", "main", "Groceries for the week", "Milk, eggs and bread", "Noted.")
    chat_with(user, "scout", "hike", "Hiking the Pyrenees in June", "Which trail?", "The GR10.")
    chat_with(user, "buddy", "lisbon", "Lisbon in May", "Plan three days", "Day one: Belém.")
    return user


@pytest.fixture(params=list(SIZES))
def size(request, page):
    width, height = SIZES[request.param]
    page.set_viewport_size({"width": width, "height": height})
    return request.param


def test_the_list_shows_every_chat_with_its_title_agent_and_activity(three_chats, size, logged_in_page):
    page = logged_in_page
    open_list(page, size)
    chats(page).locator(".chat-link").nth(2).wait_for()
    titles = chats(page).locator(".chat-item-title").all_inner_texts()
    assert titles == ["Lisbon in May", "Hiking the Pyrenees in June", "Groceries for the week"]  # newest first
    hike = chats(page).get_by_role("link", name=re.compile("^Hiking the Pyrenees"))
    assert "Scout · just now" in hike.inner_text()
    assert chats(page).locator("[aria-current=page]").inner_text().startswith("Groceries")
    page.screenshot(path=str(DOCS / ("chats.png" if size == "desktop" else "chats-390.png")))
    # Opening a chat of another agent shows it (and closes the drawer on a phone).
    hike.click()
    log(page).get_by_text("The GR10.").wait_for()
    assert page.get_by_label("Agent").input_value() == "scout"
    assert re.search(r"agent=scout&chat_id=hike", page.url)
    assert chats(page).is_visible() == (size == "desktop")


def test_rename_from_the_list(three_chats, size, logged_in_page):
    page = logged_in_page
    open_list(page, size)
    chats(page).get_by_role("button", name="Rename “Lisbon in May”").click()
    box = chats(page).get_by_label("Chat name")
    assert box.evaluate("node => node.maxLength") == 100 and box.input_value() == "Lisbon in May"
    box.fill("Lisbon, three days in May")
    box.press("Enter")
    chats(page).get_by_role("link", name=re.compile("^Lisbon, three days in May")).wait_for()
    assert Session.objects.get(chat_id="lisbon").title == "Lisbon, three days in May"
    # The keyboard is back on the chat's Rename button.
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Rename “Lisbon, three days in May”"


def test_delete_asks_first_and_then_the_chat_is_gone(three_chats, size, logged_in_page):
    page = logged_in_page
    open_list(page, size)
    chats(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    dialog.wait_for()
    assert "Lisbon in May" in dialog.inner_text()
    if size == "desktop":
        page.screenshot(path=str(DOCS / "chats-delete.png"))
    dialog.get_by_role("button", name="Cancel").click()
    assert Session.objects.filter(chat_id="lisbon").exists()
    chats(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    dialog.get_by_role("button", name="Delete chat").click()
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.chat-item-title')].some(n => n.textContent === 'Lisbon in May')"
    )
    assert not Session.objects.filter(chat_id="lisbon").exists()
    assert not Message.objects.filter(search_document__text__contains="Belém").exists()
    assert chats(page).locator(".chat-link").count() == 2


def test_deleting_the_chat_shown_opens_the_next_one(three_chats, logged_in_page):
    page = logged_in_page
    log(page).get_by_text("Milk, eggs and bread").wait_for()
    chats(page).get_by_role("button", name="Delete “Groceries for the week”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete chat").click()
    log(page).get_by_text("Day one: Belém.").wait_for()  # the newest chat of the same agent
    assert "chat_id=lisbon" in page.url
    assert log(page).get_by_text("Milk, eggs and bread").count() == 0


def test_export_downloads_the_chat_as_json_lines(three_chats, size, logged_in_page, tmp_path):
    page = logged_in_page
    open_list(page, size)
    with page.expect_download() as download_info:
        chats(page).get_by_role("link", name="Export “Hiking the Pyrenees in June”").click()
    download = download_info.value
    assert re.fullmatch(r"hiking-the-pyrenees-in-june-\d{4}-\d{2}-\d{2}\.jsonl", download.suggested_filename)
    path = tmp_path / "export.jsonl"
    download.save_as(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["role"], line["content"][0]["text"]) for line in lines] == [
        ("user", "Which trail?"),
        ("assistant", "The GR10."),
    ]


def test_a_chat_deleted_in_one_tab_leaves_the_other_tabs_list(three_chats, logged_in_page, live_server_url):
    page = logged_in_page
    other = page.context.new_page()
    other.set_viewport_size({"width": 1440, "height": 900})
    other.goto(f"{live_server_url}/?agent=scout&chat_id=hike")
    chats(other).get_by_role("link", name=re.compile("^Lisbon in May")).wait_for()
    other.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    chats(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete chat").click()
    chats(other).get_by_role("link", name=re.compile("^Lisbon in May")).wait_for(state="detached")
    # A chat started in one tab appears in the other's list.
    page.get_by_role("button", name="New chat").click()
    send_and_wait(page, "A brand new chat about kites")
    chats(other).get_by_role("link", name=re.compile("^A brand new chat about kites")).wait_for()
    other.close()


def test_the_chat_deleted_while_open_in_another_tab_is_left_there_too(three_chats, logged_in_page, live_server_url):
    page = logged_in_page
    other = page.context.new_page()
    other.goto(f"{live_server_url}/?agent=buddy&chat_id=lisbon")
    log(other).get_by_text("Day one: Belém.").wait_for()
    other.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    chats(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete chat").click()
    other.get_by_text("This chat was deleted in another tab or app.").wait_for()
    log(other).get_by_text("Milk, eggs and bread").wait_for()
    assert log(other).get_by_text("Day one: Belém.").count() == 0
    other.close()


def test_the_agent_and_the_chat_survive_a_reload(three_chats, size, logged_in_page):
    page = logged_in_page
    open_list(page, size)
    chats(page).get_by_role("link", name=re.compile("^Hiking the Pyrenees")).click()
    log(page).get_by_text("The GR10.").wait_for()
    page.reload()
    log(page).get_by_text("The GR10.").wait_for()
    assert page.get_by_label("Agent").input_value() == "scout"
    assert page.title().startswith("Scout")
    assert re.search(r"agent=scout&chat_id=hike", page.url)


def test_sending_from_a_page_opened_at_an_older_message_shows_every_message(live_server_url, user, size, page):
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="long")
    for number in range(1, 161):
        message_append(session=session, role="user" if number % 2 else "assistant", content=f"line {number}")
    linked = Message.objects.get(session=session, search_document__text="line 20").id
    from tests.browser.conftest import log_in

    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.goto(f"{live_server_url}/?agent=buddy&chat_id=long&around={linked}")
    log(page).get_by_text("Opened at this message").wait_for()
    assert log(page).get_by_text("line 160", exact=True).count() == 0
    send_and_wait(page, "and now something new")
    # The page first goes back to the newest messages, then sends: wait for the turn's reply.
    log(page).locator(".msg-user", has_text="and now something new").wait_for()
    page.wait_for_function(
        "() => { const rows = [...document.querySelectorAll('#conversation .msg')];"
        " return rows.length > 0 && rows.at(-1).classList.contains('msg-assistant')"
        " && !rows.at(-1).classList.contains('is-streaming')"
        " && document.getElementById('composer').dataset.running === 'false'; }"
    )
    texts = log(page).locator(".msg-text").all_inner_texts()
    # From the newest page on, every message in order up to the new prompt and its reply: no hole.
    assert texts[-2] == "and now something new"
    numbers = [int(text.split()[1]) for text in texts[:-2]]
    assert numbers == list(range(numbers[0], 161)) and numbers[0] <= 111
    assert "around=" not in page.url and "Opened at this message" not in page.content()


def test_agent_names_in_the_list_follow_the_agents(three_chats, logged_in_page):
    Agent.objects.filter(slug="scout").update(name="Scout the explorer")
    page = logged_in_page
    page.reload()
    chats(page).get_by_role("link", name=re.compile("Scout the explorer")).wait_for()


def press_on_lisbon(page) -> None:
    """Holds the mouse button down on the Lisbon chat's row, once the list shows the agents' names."""
    link = chats(page).get_by_role("link", name=re.compile("^Lisbon in May.*Buddy ·"))
    link.wait_for()
    box = link.bounding_box()
    page.mouse.move(box["x"] + 10, box["y"] + box["height"] / 2)
    page.mouse.down()


def test_a_click_on_a_chat_while_the_list_is_read_again_opens_it(three_chats, logged_in_page):
    """The list is read again after every turn (`chats_changed`): its rows stay the same elements, so a
    click pressed before that and released after it still opens its chat."""
    page = logged_in_page
    press_on_lisbon(page)
    page.evaluate("() => window.buddy.chats.reload()")
    page.mouse.up()
    log(page).get_by_text("Day one: Belém.").wait_for()
    assert "chat_id=lisbon" in page.url


def test_a_turn_keeps_every_row_and_writes_its_chat_into_its_own(three_chats, logged_in_page):
    """A row stays the same element while its chat is listed: a turn moves its chat's row to the top and
    writes its age into it (every row's age is written again)."""
    page = logged_in_page
    chats(page).get_by_role("link", name=re.compile("^Hiking the Pyrenees.*Scout ·")).wait_for()
    chats(page).locator(".chat-link").nth(2).wait_for()
    page.evaluate("() => document.querySelectorAll('#chat-list .chat-item').forEach((row) => { row.seen = true; })")
    page.evaluate(
        "() => document.querySelectorAll('#chat-list .chat-item-age').forEach((age) => { age.textContent = 'old'; })"
    )
    send_and_wait(page, "And butter")
    first = chats(page).locator(".chat-item").first
    page.wait_for_function("() => document.querySelector('#chat-list .chat-item').dataset.chatId === 'main'")
    kept = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('#chat-list .chat-item')]"
        ".map((row) => [row.dataset.chatId, row.seen === true]))"
    )
    assert kept == {"main": True, "lisbon": True, "hike": True}
    assert first.locator(".chat-item-title").inner_text() == "Groceries for the week"
    assert first.locator(".chat-item-age").inner_text() == "just now"
    assert first.locator(".chat-link").get_attribute("aria-current") == "page"


def test_a_click_on_a_chat_renamed_while_it_is_pressed_opens_it(three_chats, logged_in_page):
    """A chat renamed in another tab while the pointer is down on it: the list is read again and the new
    name written into the same row, so the click released after it still opens the chat."""
    page = logged_in_page
    chats(page).get_by_role("link", name=re.compile("^Hiking the Pyrenees.*Scout ·")).wait_for()
    chats(page).locator(".chat-link").nth(2).wait_for()
    page.evaluate("() => document.querySelectorAll('#chat-list .chat-item').forEach((row) => { row.seen = true; })")
    press_on_lisbon(page)
    session_rename(session=Session.objects.get(user=three_chats, chat_id="lisbon"), title="Lisbon and Sintra")
    page.evaluate("() => window.buddy.chats.reload()")
    renamed = chats(page).get_by_role("link", name=re.compile("^Lisbon and Sintra"))
    renamed.wait_for()
    for role, action in (("button", "Rename"), ("link", "Export"), ("button", "Delete")):
        assert chats(page).get_by_role(role, name=f"{action} “Lisbon and Sintra”").count() == 1
    page.mouse.up()
    log(page).get_by_text("Day one: Belém.").wait_for()
    assert "chat_id=lisbon" in page.url
    # The chat shown changed in place: the same rows, the mark of the chat shown moved from one to the other.
    rows = page.evaluate(
        "() => [...document.querySelectorAll('#chat-list .chat-item')].map((row) => [row.dataset.chatId,"
        " row.seen === true, row.classList.contains('is-current'),"
        " row.querySelector('.chat-link').getAttribute('aria-current')])"
    )
    assert sorted(rows) == [["hike", True, False, None], ["lisbon", True, True, "page"], ["main", True, False, None]]


def test_a_name_being_edited_for_a_chat_deleted_elsewhere_lets_the_list_follow_again(
    three_chats, logged_in_page, live_server_url
):
    """The other tab edits the name of the chat it shows when this tab deletes that chat: the other tab moves
    on, and its list follows the server again (a rename made afterwards shows there)."""
    page = logged_in_page
    other = page.context.new_page()
    other.set_viewport_size({"width": 1440, "height": 900})
    other.goto(f"{live_server_url}/?agent=buddy&chat_id=lisbon")
    log(other).get_by_text("Day one: Belém.").wait_for()
    other.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    chats(other).get_by_role("button", name="Rename “Lisbon in May”").click()
    chats(other).get_by_role("textbox", name="Chat name").wait_for()
    chats(page).get_by_role("button", name="Delete “Lisbon in May”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete chat").click()
    other.get_by_text("This chat was deleted in another tab or app.").wait_for()
    # The notice comes first; the tab then reads the list again and opens the next chat, which ends the edit.
    chats(other).get_by_role("textbox", name="Chat name").wait_for(state="detached")
    chats(page).get_by_role("button", name="Rename “Hiking the Pyrenees in June”").click()
    chats(page).get_by_role("textbox", name="Chat name").fill("The GR10 in June")
    chats(page).get_by_role("button", name="Save").click()
    chats(other).get_by_role("link", name=re.compile("^The GR10 in June")).wait_for()
    other.close()
