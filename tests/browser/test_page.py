"""What a new user meets in the page, end to end in a real chromium against a real daphne: only the
panels scroll, a scheduled prompt shows up in an open page, a turn looks the same live and reloaded,
long prompts get the API's answer, canvas changes are brought into view, chats have names.
The screenshots in docs/ are taken here too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from devtools.servers import ROOT, server_env
from tests.browser.conftest import log_in
from tests.browser.test_e2e import canvas, canvas_prompt, log, send_and_wait

pytestmark = pytest.mark.browser

DOCS = ROOT / "docs"


def page_scroll(page) -> float:
    return page.evaluate("document.scrollingElement.scrollTop")


def connected(page) -> None:
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")


@pytest.fixture
def busy_chat(live_server_url, user):
    """Alice's main chat with 24 messages and a canvas holding cards and an open confirmation."""
    from canvas.services import canvas_apply
    from conversations.services import message_append, session_get_or_create

    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    for index in range(12):
        message_append(session=session, role="user", content=f"Question {index}: what about item {index}?")
        message_append(session=session, role="assistant", content=f"Answer {index}. " + "Some detail. " * 12)
    for index in range(6):
        canvas_apply(
            session=session,
            command="canvas_add_card",
            params={"id": f"card{index}", "title": f"Card {index}", "body": "A few lines\n\nof body text. " * 3},
        )
    canvas_apply(
        session=session,
        command="canvas_show_confirmation",
        params={"id": "go", "title": "Go ahead?", "message": "Shall I?", "confirm_label": "Yes"},
    )
    return session


# --- 1: only the panels scroll -----------------------------------------------------------------


def test_wheel_and_keyboard_scroll_only_the_panels_never_the_page(busy_chat, logged_in_page):
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()
    log(page).get_by_text("Answer 11.").wait_for()
    canvas(page).get_by_role("article", name="Go ahead?").wait_for()
    assert page_scroll(page) == 0

    # The wheel over the canvas, the top bar and the conversation.
    for selector in ["#canvas-scroll", ".topbar", "#log-scroll", ".composer"]:
        box = page.locator(selector).bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(20, box["height"] / 2))
        for delta in (1500, -400, 3000):
            page.mouse.wheel(0, delta)
            page.wait_for_timeout(50)
            assert page_scroll(page) == 0, selector
    assert page.locator("#canvas-scroll").evaluate("node => node.scrollTop") > 0  # the panel itself did scroll

    # The keyboard: tab through every control to the confirmation's buttons and beyond, then the
    # page keys on the document.
    page.locator("body").click(position={"x": 5, "y": 5})
    reached_confirmation = False
    for _ in range(60):
        page.keyboard.press("Tab")
        assert page_scroll(page) == 0, page.evaluate("document.activeElement.outerHTML.slice(0, 120)")
        reached_confirmation |= page.evaluate("document.activeElement.textContent === 'Yes'")
    assert reached_confirmation
    page.locator(".topbar").click(position={"x": 5, "y": 5})
    for key in ["End", "PageDown", "Space", "ArrowDown", "Home"]:
        page.keyboard.press(key)
        assert page_scroll(page) == 0, key
    assert page.evaluate("document.scrollingElement.scrollHeight <= window.innerHeight")


# --- 2: a scheduled prompt shows in an open page ---------------------------------------------------


def test_a_scheduled_prompt_appears_in_an_open_page_without_a_reload(logged_in_page, user, settings):
    from agent.schedules import schedule_create

    page = logged_in_page
    connected(page)
    settings.BUDDY_LLM = "offline"
    schedule_create(
        user=user,
        text=canvas_prompt(("canvas_add_card", {"id": "brief", "title": "Morning briefing", "body": "Rain at 4"})),
        at=timezone.now() - timedelta(seconds=1),
    )
    # Another process than the server's, as the task worker is (tasks run inline in the tests' settings).
    done = subprocess.run(
        [sys.executable, "manage.py", "check_schedules", "--once"],
        cwd=ROOT,
        env=server_env(BUDDY_LLM="offline"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "queued 1 scheduled prompt(s)" in done.stdout, done.stderr

    canvas(page).get_by_role("article", name="Morning briefing").wait_for()
    scheduled = log(page).locator('.msg-user[data-kind="scheduled"]')
    scheduled.wait_for()
    assert scheduled.locator(".msg-bubble").text_content().startswith("Scheduled prompt: CANVAS:")
    log(page).get_by_text("Done: 1 canvas change(s) made.").wait_for()
    page.wait_for_function("() => document.getElementById('composer').dataset.running === 'false'")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # never reloaded

    page.reload()  # and the same after a reload: the archive knows it was scheduled
    log(page).locator('.msg-user[data-kind="scheduled"]').wait_for()


# --- 4: a turn looks the same live and reloaded ---------------------------------------------------

ROWS_JS = """() => [...document.querySelectorAll('#conversation > .msg')].map(row => ({
  classes: [...row.classList].filter(name => name !== 'is-streaming').sort().join(' '),
  kind: row.dataset.kind ?? null,
  text: row.querySelector('.msg-text')?.textContent.trim() ?? '',
  bubbleShown: !!row.querySelector('.msg-bubble:not([hidden])'),
  chips: [...row.querySelectorAll('.chip')].map(chip => chip.textContent.trim()),
  stamped: !!row.title,
}))"""


def test_a_turn_with_tool_calls_looks_the_same_live_and_after_a_reload(logged_in_page):
    page = logged_in_page
    send_and_wait(
        page,
        canvas_prompt(
            ("canvas_add_card", {"id": "groceries", "title": "Groceries", "body": "Milk"}),
            ("canvas_update_card", {"id": "nothing-here", "title": "?"}),
        ),
    )
    live = page.evaluate(ROWS_JS)
    chips = [row["chips"] for row in live if row["chips"]]
    assert chips == [["🛠 canvas_add_card", "🛠 canvas_update_card"], ["🛠 tool call failed"]]
    assert live[-1]["text"].startswith("Done: 1 canvas change(s) made.")
    assert all(row["stamped"] for row in live)  # the time tooltip, as reloaded messages have it

    page.reload()
    log(page).get_by_text("Done: 1 canvas change(s) made.").wait_for()
    assert page.evaluate(ROWS_JS) == live


# --- 5: a prompt over 64 KiB ---------------------------------------------------------------------


def test_a_prompt_too_long_for_the_model_gets_the_apis_413_message(logged_in_page, live_server_url, user, settings):
    from conversations.tokens import api_token_create

    page = logged_in_page
    connected(page)
    text = "word " * (settings.BUDDY_MAX_PROMPT_TOKENS + 1000)  # > 64 KiB and over the token limit
    token = api_token_create(user=user)
    refused = page.request.post(
        f"{live_server_url}/prompt", data={"text": text}, headers={"Authorization": f"Bearer {token}"}
    )
    assert refused.status == 413

    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    alert = log(page).get_by_role("alert")
    alert.wait_for()
    assert "That message is too long" in alert.inner_text()
    assert refused.json()["detail"] in alert.inner_text()
    assert "frame" not in alert.inner_text()
    assert page.get_by_label("Message").input_value() == text.strip()  # nothing lost


def test_a_refused_prompt_shows_the_code_and_detail_the_server_answered(logged_in_page):
    page = logged_in_page
    connected(page)
    refusal = {"code": "not_found", "detail": "There is no agent 'ghost'."}
    page.route(
        re.compile(r"/prompt$"),
        lambda route: route.fulfill(status=404, content_type="application/json", body=json.dumps(refusal)),
    )
    text = "word " * 20_000  # > 64 KiB: sent over HTTP
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    alert = log(page).get_by_role("alert")
    alert.wait_for()
    assert alert.get_attribute("data-code") == "not_found"
    assert "That agent or chat does not exist" in alert.inner_text()
    assert "There is no agent 'ghost'." in alert.inner_text()
    assert page.get_by_label("Message").input_value() == text.strip()  # nothing lost


def test_the_page_follows_the_servers_chat_id_rule_and_title_length(logged_in_page):
    from conversations.models import TITLE_MAX_CHARS
    from conversations.refs import CHAT_ID_RE

    page = logged_in_page
    samples = [
        "main",
        "chat-20250101-120000-ab12",
        "a.b:c_d-e",
        "x" * 64,
        "x" * 65,
        "",
        "a b",
        "a/b",
        "é",
        "a\nb",
        "main\n",
    ]
    accepted = page.evaluate(
        """(samples) => {
          const rule = new RegExp(JSON.parse(document.getElementById('buddy-config').textContent).limits.chatIdPattern);
          return samples.map((sample) => rule.test(sample));
        }""",
        samples,
    )
    assert accepted == [bool(CHAT_ID_RE.fullmatch(sample)) for sample in samples]
    titles = "() => JSON.parse(document.getElementById('buddy-config').textContent).limits.titleChars"
    assert page.evaluate(titles) == TITLE_MAX_CHARS  # the chat list's rename box (tests/browser/test_chats.py)


def test_a_prompt_over_64_kib_within_the_limit_runs_like_any_other(logged_in_page):
    page = logged_in_page
    text = "Please read this long note. " + "lorem ipsum " * 7000  # ~84 KB: more than one frame holds
    send_and_wait(page, text)
    log(page).get_by_text("(offline demo) You said: Please read this long note.").wait_for()
    assert log(page).get_by_role("alert").count() == 0


def test_a_reply_its_http_answer_showed_first_is_not_drawn_again_by_its_deltas(logged_in_page):
    """A prompt over HTTP is answered as soon as its turn ends, which can be before the socket's last
    frames of that turn arrive: its deltas then would draw the reply a second time."""
    page = logged_in_page
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    page.evaluate(
        """() => {
            window.buddy.turn.addPending("answered over HTTP");
            window.buddy.turn.settlePending();
            window.buddy.turn.onAnswer({ text: "The answer, once.", message_id: 987654 });
            window.buddy.onFrame({ type: "assistant_delta", text: "The answer, once." });
        }"""
    )
    assert log(page).get_by_text("The answer, once.").count() == 1
    page.evaluate(
        """() => window.buddy.onFrame({ type: "assistant_message", text: "The answer, once.", message_id: 987654 })"""
    )
    assert log(page).get_by_text("The answer, once.").count() == 1
    # The next turn's deltas are drawn again.
    page.evaluate(
        """() => window.buddy.onFrame({ type: "user_message", text: "from elsewhere", message_id: 987655 })"""
    )
    page.evaluate("""() => window.buddy.onFrame({ type: "assistant_delta", text: "A new reply" })""")
    log(page).get_by_text("A new reply").wait_for()


# --- 7: canvas changes are brought into view; focus after answering --------------------------------


def test_at_390_px_a_canvas_change_out_of_sight_is_pointed_to(logged_in_page):
    page = logged_in_page
    page.set_viewport_size({"width": 390, "height": 844})
    send_and_wait(page, canvas_prompt(("canvas_add_card", {"id": "groceries", "title": "Groceries", "body": "Milk"})))
    pointer = page.get_by_role("button", name="On the canvas: Groceries")
    pointer.wait_for()
    article = canvas(page).get_by_role("article", name="Groceries")
    assert article.bounding_box()["y"] > 844  # below the fold, under the chat
    # In sight, and covering neither the message box nor Send: the person can still write and send.
    box = pointer.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 844
    for covered in (page.get_by_label("Message"), page.get_by_role("button", name="Send")):
        other = covered.bounding_box()
        assert (
            box["y"] + box["height"] <= other["y"]
            or other["y"] + other["height"] <= box["y"]
            or box["x"] + box["width"] <= other["x"]
            or other["x"] + other["width"] <= box["x"]
        ), covered
    pointer.click()
    page.wait_for_function(
        "() => { const r = document.querySelector('[data-id=groceries]').getBoundingClientRect();"
        " return r.top >= -1 && r.top < window.innerHeight; }"
    )
    assert page.evaluate("document.activeElement.dataset.id") == "groceries"
    assert pointer.is_hidden()


def test_a_new_element_below_the_fold_of_the_canvas_panel_scrolls_into_view(busy_chat, logged_in_page):
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()
    canvas(page).get_by_role("article", name="Go ahead?").wait_for()
    send_and_wait(page, canvas_prompt(("canvas_add_card", {"id": "newest", "title": "The newest card"})))
    inside = page.evaluate(
        """() => {
          const panel = document.getElementById('canvas-scroll').getBoundingClientRect();
          const card = document.querySelector('[data-id=newest]').getBoundingClientRect();
          return card.top >= panel.top - 1 && card.bottom <= panel.bottom + 1;
        }"""
    )
    assert inside
    assert page_scroll(page) == 0


def test_answering_a_confirmation_with_the_keyboard_keeps_focus_on_it(logged_in_page):
    page = logged_in_page
    send_and_wait(
        page, canvas_prompt(("canvas_show_confirmation", {"id": "ship", "title": "Ship it?", "message": "?"}))
    )
    article = canvas(page).get_by_role("article", name="Ship it?")
    article.get_by_role("button", name="Confirm").focus()
    page.keyboard.press("Enter")
    article.get_by_text("Confirmed").wait_for()
    page.wait_for_function("() => document.getElementById('composer').dataset.running === 'false'")
    assert page.evaluate("document.activeElement.dataset.id") == "ship"
    assert page.evaluate("document.activeElement !== document.body")


# --- 8 and 11: chat names, no 404 for a chat that does not exist yet -------------------------------


def no_sideways_scroll(page) -> bool:
    """Long chat names never widen the page: the list and the header cut them with an ellipsis."""
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def shown_chat(page) -> str:
    """The name the conversation's header gives the chat shown."""
    return page.locator("#chat-current").inner_text()


@pytest.mark.parametrize("width", [1280, 390])
def test_new_chats_are_named_by_their_first_prompt_and_renamed_and_labels_fit(logged_in_page, width):
    page = logged_in_page
    page.set_viewport_size({"width": width, "height": 844})
    not_found = []
    page.on("response", lambda response: not_found.append(response.url) if response.status == 404 else None)
    send_and_wait(page, "Hello in the main chat")
    page.wait_for_function("() => document.getElementById('chat-current').textContent === 'Hello in the main chat'")
    chats = page.get_by_role("navigation", name="Chats")
    if width == 390:
        page.get_by_role("button", name="Chats").click()
    chats.get_by_role("button", name="New chat").click()
    page.get_by_text("Start a conversation with Buddy").wait_for()
    assert shown_chat(page) == "New chat"
    if width == 390:
        page.get_by_role("button", name="Chats").click()
    current = chats.locator(".chat-item.is-current")
    assert current.locator(".chat-item-title").inner_text() == "New chat"
    assert current.locator(".chat-rename-button").count() == 0  # nothing to name yet
    if width == 390:
        page.get_by_role("button", name="Close the chat list").click()
    send_and_wait(page, "Plan a three-day trip to Lisbon in May, with museums and a day at the sea in Cascais")
    page.wait_for_function("() => document.getElementById('chat-current').textContent.startsWith('Plan a')")
    assert shown_chat(page).startswith("Plan a three-day") and shown_chat(page).endswith("…")  # 60 characters
    assert no_sideways_scroll(page)

    if width == 390:
        page.get_by_role("button", name="Chats").click()
    chats.get_by_role("button", name=re.compile("^Rename “Plan a three-day")).click()
    name = chats.get_by_label("Chat name")
    assert name.input_value().startswith("Plan a three-day trip to Lisbon in May")
    name.fill("Lisbon in May")
    chats.get_by_role("button", name="Save").click()
    page.wait_for_function("() => document.getElementById('chat-current').textContent === 'Lisbon in May'")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Rename “Lisbon in May”"

    page.reload()
    page.wait_for_function("() => document.getElementById('chat-current').textContent === 'Lisbon in May'")
    assert no_sideways_scroll(page)
    assert not_found == []  # neither the new chat nor the first one asked for a history that is not there


def test_a_fresh_account_opens_without_a_404(page, live_server_url, user):
    responses = []
    page.on("response", lambda response: responses.append((response.status, response.url)))
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    connected(page)
    page.get_by_text("Start a conversation with Buddy").wait_for()
    page.get_by_role("button", name="New chat").click()
    connected(page)
    page.wait_for_timeout(300)
    assert [url for status, url in responses if status >= 400] == []


# --- screenshots for docs/ ---------------------------------------------------------------------


def test_screenshots_of_the_page_at_390_px_and_the_admin_session_page(busy_chat, page, live_server_url, user):
    from django.contrib.auth import get_user_model

    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    connected(page)
    send_and_wait(
        page,
        canvas_prompt(
            (
                "canvas_show_table",
                {
                    "id": "plan",
                    "title": "This week",
                    "columns": ["Day", "Plan"],
                    "rows": [["Mon", "Gym"], ["Tue", "Team lunch"], ["Wed", "Dentist"]],
                },
            ),
        ),
    )
    page.get_by_role("button", name="On the canvas: This week").wait_for()
    page.screenshot(path=str(DOCS / "screenshot-390.png"))

    # The chat's memory notes, which its admin page shows above the transcript.
    from memory.notes.services import note_put

    busy_chat.title = "Planning the week"
    busy_chat.save(update_fields=["title"])
    source = busy_chat.messages.filter(role="assistant").order_by("id").first()
    note_put(user=user, session=busy_chat, path="/memories/plans.md", content="Gym on Monday\nTeam lunch on Tuesday")
    note_put(user=user, session=busy_chat, path="/memories/items.md", content="Items 0–11", by="model", source=source)

    get_user_model().objects.create_superuser(username="root", password="root-pass-1", email="r@x.test")
    admin = page.context.browser.new_context(viewport={"width": 1280, "height": 1100}, locale="en-US")
    admin_page = admin.new_page()
    admin_page.goto(f"{live_server_url}/admin/login/")
    admin_page.get_by_label("Username").fill("root")
    admin_page.get_by_label("Password").fill("root-pass-1")
    admin_page.get_by_role("button", name=re.compile("Log in", re.I)).click()
    admin_page.goto(f"{live_server_url}/admin/conversations/session/{busy_chat.pk}/change/")
    admin_page.get_by_text("transcript", exact=False).first.wait_for()
    assert admin_page.locator(".buddy-transcript li").count() >= 24
    assert admin_page.get_by_role("link", name="canvas", exact=True).count() == 1
    assert admin_page.locator(".buddy-notes").get_by_role("link", name="/memories/items.md").is_visible()
    admin_page.locator(".field-transcript").scroll_into_view_if_needed()
    admin_page.evaluate("window.scrollTo(0, 0)")
    admin_page.screenshot(path=str(DOCS / "admin-session.png"))
    # At 1280 px the message and model-call lists fit: no column pushed out of view.
    for name in ["message", "modelcall"]:
        admin_page.goto(f"{live_server_url}/admin/conversations/{name}/")
        results = admin_page.locator("#changelist .results")
        results.wait_for()
        widths = results.evaluate("node => [node.scrollWidth, node.clientWidth]")
        assert widths[0] <= widths[1], (name, widths)
    admin_page.goto(f"{live_server_url}/admin/")
    assert "Canvases" in admin_page.content() and "Canvass" not in admin_page.content()
    admin.close()
