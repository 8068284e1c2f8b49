"""Reading what Buddy shows, in a real chromium against a real daphne: Markdown tables and highlighted
code in a reply and on the canvas (wrapping at word boundaries at 390 px), Copy on messages and code
blocks, a day heading and a visible time on each message, sources with who, when and a snippet (folded
past three), a note's link to the prompt it came from, the theme a person chooses, and the keyboard's
focus after loading earlier messages. The screenshots in docs/ named reading-* are taken here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import DEFAULT_TIMEOUT_MS, log_in
from tests.browser.reading_chat import SOURCE_TEXTS, reading_chat
from tests.browser.test_e2e import canvas_prompt, log, send_and_wait
from tests.browser.test_notes import an_old_chat

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs"

# For every word in `selector`'s text, whether the browser laid it out on more than one line: a word
# broken mid-way ("Enterpri" / "se") has two boxes.
BROKEN_WORDS_JS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""


def open_page(browser: Any, base_url: str, *, width: int = 1440, height: int = 900, **options: Any) -> Any:
    # Reduced motion: the screenshots show the page settled, not mid-animation.
    context = browser.new_context(
        viewport={"width": width, "height": height}, locale="en-US", reduced_motion="reduce", **options
    )
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.js_errors = []
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    log_in(page, base_url, "alice", "wonderland-pass-1")
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    return page


def close(page: Any) -> None:
    errors = page.js_errors
    page.context.close()
    assert errors == []


def reply_with_table(page: Any) -> Any:
    reply = log(page).locator(".msg-assistant", has=page.locator("table")).first
    reply.wait_for()
    return reply


@pytest.mark.parametrize("width", [1440, 390])
def test_a_table_and_highlighted_code_render_in_a_reply_and_on_the_canvas(browser, live_server_url, user, width):
    reading_chat(user)
    page = open_page(browser, live_server_url, width=width, height=844 if width == 390 else 900)
    reply = reply_with_table(page)
    assert reply.locator("th").all_inner_texts() == ["Plan", "Price", "Who it suits"]
    assert reply.locator("tbody tr").nth(2).locator("td").first.inner_text() == "Enterprise"
    code = reply.locator("pre code.language-python")
    assert code.locator(".hljs-keyword", has_text="def").count() == 1  # highlighted, not just monospaced
    assert code.locator(".hljs-string").count() >= 1
    assert reply.locator(".code-lang").inner_text() == "python"

    checklist = page.locator("#canvas article[data-id='checklist']")
    assert checklist.locator("strong").inner_text() == "Release checklist"  # canvas text is Markdown now
    assert checklist.locator("th").all_inner_texts() == ["Step", "Owner", "Status"]
    assert checklist.locator("pre code.language-bash .hljs-keyword").count() >= 1
    assert checklist.locator("pre code.language-bash .hljs-string").inner_text() == '"ready to migrate"'
    # Words wrap only between words, in the reply's table and in the canvas's tables alike.
    for selector in ("#conversation td, #conversation th", "#canvas td, #canvas th"):
        assert page.evaluate(BROKEN_WORDS_JS, selector) == [], selector
    if width == 390:
        # A table wider than the bubble scrolls inside it; the page never scrolls sideways.
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        table_box = reply.locator(".md-table")
        assert table_box.evaluate("node => getComputedStyle(node).overflowX") == "auto"
        table_box.scroll_into_view_if_needed()
        page.screenshot(path=str(DOCS / "reading-390.png"))
    else:
        reply.scroll_into_view_if_needed()
        page.screenshot(path=str(DOCS / "reading-reply.png"))
        page.locator("#canvas-panel").screenshot(path=str(DOCS / "reading-canvas.png"))
    close(page)


def test_copy_puts_a_code_block_and_a_reply_on_the_clipboard(browser, live_server_url, user):
    reading_chat(user)
    page = open_page(browser, live_server_url)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server_url)
    reply = reply_with_table(page)
    copy_code = reply.get_by_role("button", name="Copy code")
    copy_code.click()
    assert page.evaluate("navigator.clipboard.readText()") == (
        'def plan_create(*, name: str, seats: int = 1) -> dict:\n    """A new plan; `seats` is at least one."""\n'
        '    return {"name": name, "seats": max(seats, 1)}'
    )
    assert reply.get_by_role("button", name="Copied code").inner_text() == "Copied"
    reply.get_by_role("button", name="Copy code").wait_for()  # back to "Copy" after a moment

    reply.get_by_role("button", name="Copy reply").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Here are the three plans") and "| Enterprise | 99 € |" in copied  # the Markdown
    prompt = log(page).locator(".msg-user", has_text="Compare the plans")
    prompt.get_by_role("button", name="Copy prompt").click()
    assert page.evaluate("navigator.clipboard.readText()") == "Compare the plans, with code?"
    close(page)


def test_each_message_is_headed_timed_and_grouped_by_day(browser, live_server_url, user):
    chat = reading_chat(user)
    page = open_page(browser, live_server_url)
    reply_with_table(page)
    days = log(page).locator(".day-separator")
    assert days.all_inner_texts() == ["Yesterday", "Today"]
    assert days.evaluate_all("nodes => nodes.map((node) => node.tagName)") == ["H3", "H3"]
    prompt = (
        log(page)
        .get_by_role("article", name=re.compile(r"^You, \d{1,2}:\d{2} [AP]M$"))
        .filter(has_text="Compare the plans")
    )
    assert prompt.count() == 1
    time = prompt.locator("time")
    assert time.is_visible() and re.fullmatch(r"\d{1,2}:\d{2} [AP]M", time.inner_text())
    assert time.get_attribute("datetime").startswith(str(chat["prompt"].created_at.year))
    assert log(page).get_by_role("heading", name=re.compile(r"^Buddy, ")).count() >= 8
    close(page)


def test_a_sources_list_shows_who_when_and_a_snippet_and_folds_past_three(browser, live_server_url, user):
    chat = reading_chat(user)
    page = open_page(browser, live_server_url)
    sources = log(page).locator(f'[data-message-id="{chat["reply"].id}"] .msg-sources')
    sources.wait_for()
    links = sources.locator("a.source-link")  # folded ones too
    assert links.count() == len(SOURCE_TEXTS)
    visible = [link.inner_text() for link in links.all() if link.is_visible()]
    assert len(visible) == 3
    assert visible[0].startswith("You · ") and SOURCE_TEXTS[0] in visible[0]
    more = sources.get_by_role("button", name="3 more")
    assert more.get_attribute("aria-expanded") == "false"
    sources.scroll_into_view_if_needed()
    page.screenshot(path=str(DOCS / "reading-sources.png"))
    more.click()
    assert all(link.is_visible() for link in links.all())
    assert SOURCE_TEXTS[5] in links.nth(5).inner_text()
    assert page.evaluate("document.activeElement.textContent").endswith(SOURCE_TEXTS[3])  # the first unfolded
    sources.get_by_role("button", name="Show fewer").click()
    assert not links.nth(5).is_visible()
    links.nth(1).click()
    linked = log(page).locator(f'[data-message-id="{chat["sources"][1].id}"]')
    linked.wait_for()
    assert linked.locator(".linked-marker").inner_text() == "Opened at this message"
    assert page.evaluate("document.activeElement.dataset.messageId") == str(chat["sources"][1].id)
    close(page)


def test_a_live_reply_that_searched_shows_its_sources_snippets(browser, live_server_url, user):
    an_old_chat(user)
    page = open_page(browser, live_server_url)
    send_and_wait(page, canvas_prompt(("search_history", {"query": "pricing plan", "limit": 3})))
    sources = log(page).locator(".msg-sources").last
    sources.wait_for()
    assert "The pricing plan is forty euros a month" in sources.inner_text()  # from the frame, before any reload
    close(page)


def test_a_notes_link_opens_the_prompt_it_came_from(browser, live_server_url, user):
    chat = reading_chat(user)
    page = open_page(browser, live_server_url)
    page.get_by_role("button", name="Memory", exact=True).click()
    note = page.get_by_role("region", name="Memory").get_by_role("article").filter(has_text="plans.md")
    note.get_by_role("link", name="from this message").click()
    prompt = log(page).locator(f'[data-message-id="{chat["note_prompt"].id}"]')
    prompt.wait_for()
    assert "msg-user" in prompt.get_attribute("class") and "What do you know about me?" in prompt.inner_text()
    assert prompt.locator(".linked-marker").is_visible()
    assert page.evaluate("document.activeElement.dataset.messageId") == str(chat["note_prompt"].id)
    close(page)


def test_the_theme_a_person_chooses_survives_a_reload_and_another_browser(browser, live_server_url, user):
    page = open_page(browser, live_server_url, color_scheme="light")
    background = "getComputedStyle(document.body).backgroundColor"
    light = page.evaluate(background)
    page.get_by_label("Theme", exact=True).select_option("dark")
    page.wait_for_function("() => document.documentElement.dataset.colorScheme === 'dark'")
    dark = page.evaluate(background)
    assert dark != light
    page.wait_for_function(
        "async () => (await (await fetch('/preferences')).json()).theme === 'dark'"
    )  # saved on the server
    page.reload()
    assert page.evaluate("document.documentElement.dataset.colorScheme") == "dark"
    assert page.get_by_label("Theme", exact=True).input_value() == "dark"
    other = open_page(browser, live_server_url, color_scheme="light")  # another browser, same person
    assert other.evaluate("document.documentElement.dataset.colorScheme") == "dark"
    assert other.evaluate(background) == dark
    # A canvas theme the model sets shows over the person's while its chat is open.
    send_and_wait(other, canvas_prompt(("canvas_set_theme", {"theme": "light"})))
    other.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    assert other.evaluate(background) == light
    close(other)
    page.get_by_label("Theme", exact=True).select_option("system")
    page.wait_for_function("async () => (await (await fetch('/preferences')).json()).theme === 'system'")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.colorScheme") is None
    assert page.evaluate(background) == light  # the system's (light) again
    close(page)


def test_screenshot_of_the_dark_theme(browser, live_server_url, user):
    from web.services import preferences_set

    reading_chat(user)
    preferences_set(user=user, theme="dark")
    page = open_page(browser, live_server_url)
    reply_with_table(page).scroll_into_view_if_needed()
    page.locator("#canvas article[data-id='checklist']").wait_for()
    page.screenshot(path=str(DOCS / "reading-dark.png"))
    close(page)


def test_after_loading_earlier_messages_the_keyboard_stays_in_the_log(browser, live_server_url, user):
    an_old_chat(user)  # 80 messages: a first page of 50, then the last 30
    page = open_page(browser, live_server_url)
    button = page.get_by_role("button", name="Load earlier messages")
    log(page).get_by_text("Small talk number 79").wait_for()
    page.evaluate("document.getElementById('log-scroll').scrollTop = 200")  # away from the top: no auto-load
    button.focus()
    page.keyboard.press("Enter")
    log(page).get_by_text("Small talk number 0", exact=True).wait_for()
    page.wait_for_function("() => document.getElementById('load-earlier').hidden")
    focused = page.evaluate("() => [document.activeElement.tagName, document.activeElement.dataset.messageId]")
    assert focused[0] == "ARTICLE" and focused[1] is not None  # a message, not the page's <body>
    close(page)


def test_a_streaming_reply_is_busy_until_it_ends(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    fake_ws.send({"type": "user_message", "text": "hi", "message_id": 5})
    fake_ws.send({"type": "assistant_delta", "text": "Hello, wor"})
    row = log(page).locator(".msg-assistant.is-streaming")
    row.wait_for()
    # A screen reader waits for the whole reply instead of announcing every streamed word.
    assert row.get_attribute("aria-busy") == "true"
    fake_ws.send({"type": "assistant_message", "text": "Hello, world", "message_id": 6, "sources": []})
    done = log(page).locator('.msg-assistant[data-message-id="6"]')
    done.wait_for()
    assert done.get_attribute("aria-busy") is None and done.get_by_role("button", name="Copy reply").is_visible()


def test_the_keyboard_stays_on_a_note_after_saving_deleting_and_restoring_it(browser, live_server_url, user):
    reading_chat(user)
    page = open_page(browser, live_server_url)
    page.get_by_role("button", name="Memory", exact=True).click()
    memory = page.get_by_role("region", name="Memory")
    card = memory.get_by_role("article").filter(has_text="plans.md")
    focused_name = "() => document.activeElement.getAttribute('aria-label') || document.activeElement.textContent"

    card.get_by_role("button", name="Edit /memories/plans.md").click()
    card.get_by_label("Text of /memories/plans.md").fill("Team plan, yearly")
    card.get_by_role("button", name="Save").press("Enter")
    card.get_by_text("Team plan, yearly").wait_for()
    page.wait_for_function(f"() => ({focused_name})() === 'Edit /memories/plans.md'")

    card.get_by_role("button", name="Delete /memories/plans.md").press("Enter")
    # The note moves to "Recently deleted", and the keyboard to its Restore button there.
    page.wait_for_function(f"() => ({focused_name})() === 'Restore /memories/plans.md'")
    page.keyboard.press("Enter")
    card.get_by_text("Team plan, yearly").wait_for()
    page.wait_for_function(f"() => ({focused_name})() === 'Edit /memories/plans.md'")
    close(page)
