"""The Memory view and provenance in a real chromium against a real daphne and the offline model:
notes listed, edited, deleted, restored; a note's and a reply's source links open the conversation at
that message."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations.models import Message
from conversations.services import message_append, session_get_or_create
from memory.models import Note
from memory.notes.paths import NOTE_MAX_BYTES
from memory.notes.services import note_delete, note_put
from tests.browser.test_e2e import canvas_prompt, log, send_and_wait

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "memory.png"
SCREENSHOT_NARROW = ROOT / "docs" / "memory-390.png"
SCREENSHOT_DELETED = ROOT / "docs" / "memory-deleted.png"


def memory(page):
    return page.get_by_role("region", name="Memory")


def chat_notes(page):
    return memory(page).locator("#memory-chat")


def recently_deleted(page):
    return memory(page).get_by_role("region", name=re.compile("^Recently deleted"))


def memory_with_plans(page, user):
    """Alice's main chat with a note of her plans, and the page showing its Memory view."""
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    message_append(session=session, role="user", content="Remember my plans")
    note_put(user=user, session=session, path="/memories/plans.md", content="Trip to Lisbon in May")
    page.reload()
    open_memory(page)
    return session


def open_memory(page):
    page.get_by_role("button", name="Memory", exact=True).click()
    memory(page).wait_for()


def an_old_chat(user, messages: int = 80) -> list[Message]:
    """A chat with a long past: the pricing message far above the newest page of history."""
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    start = timezone.now() - timedelta(days=30)
    archived = []
    for number in range(messages):
        role = "user" if number % 2 == 0 else "assistant"
        text = "The pricing plan is forty euros a month" if number == 10 else f"Small talk number {number}"
        message = message_append(session=session, role=role, content=text)
        Message.objects.filter(pk=message.pk).update(created_at=start + timedelta(minutes=number))
        archived.append(message)
    return archived


def test_the_memory_view_lists_edits_deletes_and_restores_notes(logged_in_page, user):
    page = logged_in_page
    note = {"command": "create", "path": "/memories/plans.md", "file_text": "Trip to Lisbon in May"}
    send_and_wait(page, canvas_prompt(("memory", note)))
    open_memory(page)
    card = chat_notes(page).get_by_role("article").filter(has_text="plans.md")
    card.get_by_text("Trip to Lisbon in May").wait_for()
    assert "Kept by Buddy" in card.inner_text()
    assert memory(page).get_by_text("Nothing Buddy remembers across chats yet.").is_visible()
    assert recently_deleted(page).get_by_text("Nothing deleted recently.").is_visible()

    card.get_by_role("button", name="Edit /memories/plans.md").click()
    card.get_by_label("Text of /memories/plans.md").fill("Trip to Lisbon in June")
    card.get_by_role("button", name="Save").click()
    card.get_by_text("Trip to Lisbon in June").wait_for()
    assert "Edited by you" in card.inner_text()
    assert card.get_by_role("link", name="from this message").count() == 0  # the user's own text now
    assert Note.objects.get().content == "Trip to Lisbon in June"

    card.get_by_role("button", name="History of /memories/plans.md").click()
    versions = card.get_by_role("list", name="Versions of /memories/plans.md")
    versions.wait_for()
    assert versions.get_by_role("listitem").count() == 2
    versions.get_by_role("button", name=re.compile("^Restore this version")).click()
    versions.wait_for(state="detached")  # the list is drawn again, with the note as restored
    card.locator(".note-text", has_text="Trip to Lisbon in May").wait_for()
    assert Note.objects.get().content == "Trip to Lisbon in May"
    assert "Restored by you" in card.inner_text()  # Buddy's text again, and where it came from
    assert card.get_by_role("link", name="from this message").count() == 1

    card.get_by_role("button", name="Delete /memories/plans.md").click()
    gone = recently_deleted(page).get_by_role("article").filter(has_text="plans.md")
    gone.get_by_text("Trip to Lisbon in May").wait_for()
    assert not Note.objects.exists()
    restore = gone.get_by_role("button", name="Restore /memories/plans.md")
    assert restore.evaluate("node => node === document.activeElement")  # the keyboard is where the note went
    restore.click()
    card.get_by_text("Trip to Lisbon in May").wait_for()
    assert Note.objects.get().content == "Trip to Lisbon in May"

    page.get_by_role("button", name="Canvas", exact=True).click()
    page.get_by_role("region", name="Canvas").wait_for()
    assert memory(page).is_hidden()


def test_a_deleted_note_comes_back_after_a_reload_with_where_it_came_from(logged_in_page, user):
    page = logged_in_page
    note = {"command": "create", "path": "/memories/plans.md", "file_text": "Trip to Lisbon in May"}
    send_and_wait(page, canvas_prompt(("memory", note)))
    log(page).get_by_text("memory create /memories/plans.md: saved.").wait_for()  # the demo says what it did
    source_id = Note.objects.get().source_message_id
    assert source_id
    # The link opens the person's message the note came from: the prompt of the tool call's turn.
    prompt_id = Message.objects.filter(id__lt=source_id, is_turn_start=True).latest("id").id
    open_memory(page)
    card = chat_notes(page).get_by_role("article").filter(has_text="plans.md")
    card.get_by_role("button", name="Delete /memories/plans.md").click()
    recently_deleted(page).get_by_role("article").filter(has_text="plans.md").wait_for()

    page.reload()
    open_memory(page)
    gone = recently_deleted(page).get_by_role("article").filter(has_text="plans.md")
    gone.get_by_text("Trip to Lisbon in May").wait_for()
    assert "Deleted by you" in gone.inner_text() and "this chat" in gone.inner_text()
    assert chat_notes(page).get_by_text("Nothing yet.").is_visible()
    gone.get_by_role("button", name="Restore /memories/plans.md").click()
    card.get_by_text("Trip to Lisbon in May").wait_for()
    assert "Restored by you" in card.inner_text()
    link = card.get_by_role("link", name="from this message")
    assert f"around={prompt_id}#" in link.get_attribute("href")
    recently_deleted(page).get_by_text("Nothing deleted recently.").wait_for()
    assert Note.objects.get().source_message_id == source_id
    link.click()
    log(page).locator(f'[data-message-id="{prompt_id}"].is-linked').wait_for()


def test_the_memory_view_says_when_it_cannot_reach_buddy_and_recovers(logged_in_page, user):
    page = logged_in_page
    session = memory_with_plans(page, user)
    card = chat_notes(page).get_by_role("article").filter(has_text="plans.md")
    card.wait_for()

    attempts: list[float] = []

    def unreachable(route):
        attempts.append(time.monotonic())
        route.abort("internetdisconnected")

    notes_url = re.compile(r"/memory/notes(\?|$)")
    page.route(notes_url, unreachable)
    page.get_by_role("button", name="Canvas", exact=True).click()
    page.get_by_role("button", name="Memory", exact=True).click()
    status = memory(page).get_by_role("status").filter(has_text="Cannot reach Buddy — retrying…")
    status.wait_for()
    assert card.is_visible()  # what it showed stays: never a blank view
    deadline = time.monotonic() + 15
    while len(attempts) < 6 and time.monotonic() < deadline:  # three tries of its two lists
        page.wait_for_timeout(100)
    tries = attempts[::2]
    assert len(tries) >= 3, attempts
    assert tries[2] - tries[1] > 1.5 * (tries[1] - tries[0])  # it waits longer each time

    note_put(user=user, session=session, path="/memories/later.md", content="Written while away")
    page.unroute(notes_url)
    status.wait_for(state="hidden")
    chat_notes(page).get_by_text("Written while away").wait_for()
    assert card.is_visible()


def test_a_refused_note_edit_says_what_the_server_said_and_an_oversized_one_is_never_sent(logged_in_page, user):
    page = logged_in_page
    memory_with_plans(page, user)
    card = memory(page).get_by_role("article").filter(has_text="plans.md")
    card.get_by_role("button", name="Edit /memories/plans.md").click()
    box = card.get_by_label("Text of /memories/plans.md")
    error = card.get_by_role("alert")

    puts: list[str] = []
    refusal = {
        "code": "invalid",
        "detail": "The note was refused.",
        "errors": [{"field": "content", "message": "must not contain a NUL character"}],
    }

    def refuse(route):
        if route.request.method != "PUT":
            route.fallback()
            return
        puts.append(route.request.post_data)
        route.fulfill(status=422, content_type="application/json", body=json.dumps(refusal))

    page.route(re.compile(r"/memory/notes$"), refuse)
    box.fill("Trip to Lisbon in June")
    card.get_by_role("button", name="Save").click()
    page.wait_for_function("() => document.querySelector('.note-error').textContent !== ''")
    assert error.inner_text() == "The note was refused. content: must not contain a NUL character"
    assert len(puts) == 1

    box.fill("é" * (NOTE_MAX_BYTES // 2 + 1))  # two bytes each in UTF-8
    card.get_by_role("button", name="Save").click()
    page.wait_for_function("() => document.querySelector('.note-error').textContent.startsWith('A note holds')")
    assert f"{NOTE_MAX_BYTES:,} bytes" in error.inner_text()
    assert len(puts) == 1  # refused here, never sent
    assert Note.objects.get().content == "Trip to Lisbon in May"


def test_a_notes_source_link_opens_the_conversation_at_that_message(logged_in_page, user):
    page = logged_in_page
    archived = an_old_chat(user)
    source = archived[10]
    session = source.session
    Note.objects.create(
        user=user,
        session=session,
        scope="chat",
        path="/memories/pricing.md",
        content="Plan: 40 EUR/month",
        updated_by="model",
        source_message=source,
    )
    page.reload()
    open_memory(page)
    memory(page).get_by_role("link", name="from this message").click()
    linked = log(page).locator(f'[data-message-id="{source.id}"]')
    linked.wait_for()
    assert "is-linked" in linked.get_attribute("class")
    assert "forty euros" in linked.inner_text()
    assert linked.is_visible()  # scrolled into view
    page.get_by_role("button", name="Back to the latest messages").click()
    log(page).get_by_text("Small talk number 79").wait_for()
    assert log(page).locator(f'[data-message-id="{source.id}"]').count() == 0


def test_a_reply_that_searched_links_the_messages_it_drew_on(logged_in_page, user):
    page = logged_in_page
    archived = an_old_chat(user)
    page.reload()
    send_and_wait(page, canvas_prompt(("search_history", {"query": "pricing plan", "limit": 3})))
    reply = log(page).locator(".msg-assistant", has=page.locator(".msg-sources")).last
    reply.wait_for()
    hrefs = [link.get_attribute("href") for link in reply.get_by_role("link").all()]
    assert any(f"around={archived[10].id}#" in href for href in hrefs), hrefs
    page.reload()  # the same after a reload, from /history
    reply = log(page).locator(".msg-assistant", has=page.locator(".msg-sources")).last
    reply.wait_for()
    reply.locator(f'a[href*="around={archived[10].id}#"]').click()
    log(page).locator(f'[data-message-id="{archived[10].id}"].is-linked').wait_for()


def test_screenshot_of_the_memory_view(logged_in_page, user):
    page = logged_in_page
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    message_append(session=session, role="user", content="I'm planning a trip to Lisbon in May, on a budget.")
    kept = message_append(session=session, role="assistant", content="Noted — Lisbon in May, budget-friendly.")
    message_append(session=session, role="user", content="Remind me what we planned?")
    message_append(session=session, role="assistant", content="Lisbon in May, on a budget — see the note.")
    trip = "Lisbon, 12–19 May\nBudget: 900 EUR, trains over flights\nWants: tiles museum, LX Factory"
    note_put(user=user, session=session, path="/memories/trip.md", content="Lisbon in May", by="model", source=kept)
    note_put(user=user, session=session, path="/memories/trip.md", content=trip, by="model", source=kept)
    note_put(user=user, session=session, path="/memories/todo.md", content="Book the night train by Friday")
    note_put(user=user, session=None, path="/memories/profile/diet.md", content="Vegetarian\nPrefers short answers")
    hotels = "Alfama: 3 nights"
    note_put(user=user, session=session, path="/memories/hotels.md", content=hotels, by="model", source=kept)
    note_delete(user=user, session=session, path="/memories/hotels.md")
    note_put(user=user, session=None, path="/memories/profile/city.md", content="Lives in Porto")
    note_delete(user=user, session=None, path="/memories/profile/city.md")
    page.reload()
    open_memory(page)
    memory(page).get_by_text("Book the night train by Friday").wait_for()
    card = chat_notes(page).get_by_role("article").filter(has_text="trip.md")
    card.get_by_role("button", name="History of /memories/trip.md").click()
    card.get_by_role("list", name="Versions of /memories/trip.md").wait_for()
    page.screenshot(path=str(SCREENSHOT))
    gone = recently_deleted(page)
    gone.get_by_text("Alfama: 3 nights").wait_for()
    gone.scroll_into_view_if_needed()
    memory(page).screenshot(path=str(SCREENSHOT_DELETED))
    page.set_viewport_size({"width": 390, "height": 844})
    memory(page).scroll_into_view_if_needed()
    memory(page).screenshot(path=str(SCREENSHOT_NARROW))
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, "the page scrolls sideways at 390 px"


def test_a_question_about_memory_shows_the_whole_note_and_says_when_a_yes_did_nothing(logged_in_page, user):
    """The page shows a long proposed note whole (scrolling inside its card); after the chat note it
    came from was overwritten, the yes is answered on the card and in the log with why nothing happened."""
    page = logged_in_page
    text = "\n".join(f"line {number}: likes green tea" for number in range(80)) + "\nthe very last line"
    create = {"command": "create", "path": "/memories/tea.md", "file_text": text}
    rename = {"command": "rename", "old_path": "/memories/tea.md", "new_path": "/memories/profile/tea.md"}
    send_and_wait(page, canvas_prompt(("memory", create)))
    send_and_wait(page, canvas_prompt(("memory", rename)))
    canvas = page.get_by_role("region", name="Canvas")
    question = canvas.get_by_role("article").filter(has_text="Remember in all chats?")
    body = question.get_by_role("group", name="Question (scrollable)")
    assert body.inner_text().endswith(text)
    assert body.evaluate("node => node.scrollHeight > node.clientHeight")  # long: it scrolls, nothing is cut
    body.evaluate("node => { node.scrollTop = node.scrollHeight; }")
    assert question.get_by_text("the very last line").is_visible()

    send_and_wait(page, canvas_prompt(("memory", {**create, "file_text": "likes black coffee"})))
    question.get_by_role("button", name="Remember").click()
    question.get_by_text("Not done: the notes changed after this question was asked").wait_for()
    log(page).locator(".msg-user", has_text="Not done: the notes changed").wait_for()
    # The answer starts a turn of its own: the test ends when it has.
    page.wait_for_function("() => document.getElementById('composer').dataset.running === 'false'")
    assert not Note.objects.filter(scope="profile").exists()


def test_a_notes_history_loads_older_versions_a_page_at_a_time(logged_in_page, user):
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    for number in range(25):
        note_put(user=user, session=session, path="/memories/plans.md", content=f"plan {number}")
    page = logged_in_page
    page.reload()
    open_memory(page)
    card = memory(page).get_by_role("article").filter(has_text="plans.md")
    card.get_by_role("button", name="History of /memories/plans.md").click()
    versions = card.get_by_role("list", name="Versions of /memories/plans.md")
    versions.wait_for()
    assert versions.get_by_role("listitem").count() == 20
    card.get_by_role("button", name="Show older versions of /memories/plans.md").press("Enter")
    versions.get_by_text("plan 0", exact=True).wait_for()
    assert versions.get_by_role("listitem").count() == 25
    # The button that was pressed is gone: the keyboard is on the first older version, not the page's body.
    focused = "() => document.activeElement.closest('li')?.querySelector('.note-version-text')?.textContent"
    assert page.evaluate(focused) == "plan 4"
    assert card.get_by_role("button", name="Show older versions of /memories/plans.md").count() == 0
