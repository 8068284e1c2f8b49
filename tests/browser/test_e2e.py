"""End to end: a real chromium, a real daphne, the real consumer and turn with the offline model
(`BUDDY_LLM=offline`: a prompt `CANVAS: [{"name": TOOL, "input": {...}}, ...]` makes exactly those
tool calls; other prompts get a short deterministic answer that echoes the prompt).

They run against main's consumer, turn and GET /history (README, "HTTP API"): on SQLite, and on
PostgreSQL + Redis when DATABASE_URL and REDIS_URL say so.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.browser

XSS_FLAG = "buddyPwned"
XSS_PAYLOAD = f'<img src=x onerror="window.{XSS_FLAG}=1"><script>window.{XSS_FLAG}=2</script>'


def canvas_prompt(*calls: tuple[str, dict]) -> str:
    return "CANVAS: " + json.dumps([{"name": name, "input": tool_input} for name, tool_input in calls])


def send_and_wait(page, text: str) -> None:
    """Sends `text` through the Message box and waits until the turn it started has ended."""
    # Before the socket is open the page keeps the text and says so; a person would wait too.
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    # The prompt shows at once as pending; the server's user_message confirms it, and the
    # assistant_message (or an error) ends the turn.
    page.wait_for_function(
        "() => !document.querySelector('#conversation [data-pending]')"
        " && document.getElementById('composer').dataset.running === 'false'"
    )
    assert page.get_by_label("Message").input_value() == "", "the prompt was not sent"


def canvas(page):
    return page.get_by_role("region", name="Canvas")


def log(page):
    return page.get_by_role("log")


def test_a_prompt_gets_a_reply_that_stays_after_reload(logged_in_page):
    page = logged_in_page
    send_and_wait(page, "Hello Buddy, what can you do?")
    assert log(page).locator(".msg-user .msg-text").last.inner_text() == "Hello Buddy, what can you do?"
    reply = log(page).locator(".msg-assistant[data-message-id]").last
    assert reply.locator(".msg-text").inner_text().strip() != ""
    assert log(page).get_by_role("alert").count() == 0

    page.reload()
    log(page).get_by_text("Hello Buddy, what can you do?", exact=True).wait_for()
    assert log(page).locator(".msg-assistant[data-message-id]").count() >= 1


def test_a_card_appears_and_is_replayed_after_reload(logged_in_page):
    page = logged_in_page
    send_and_wait(
        page,
        canvas_prompt(("canvas_add_card", {"id": "groceries", "title": "Groceries", "body": "Milk and eggs"})),
    )
    card = canvas(page).get_by_role("article", name="Groceries")
    card.wait_for()
    assert "Milk and eggs" in card.inner_text()

    page.reload()
    card.wait_for()
    assert canvas(page).locator("article").count() == 1
    # After a reload the history shows the tool call as a chip.
    log(page).locator(".chip", has_text="canvas_add_card").first.wait_for()


def test_switching_agent_shows_its_own_canvas_and_back(scout_agent, logged_in_page):
    page = logged_in_page
    send_and_wait(page, canvas_prompt(("canvas_add_card", {"id": "c1", "title": "Buddy's card"})))
    canvas(page).get_by_role("heading", name="Buddy's card").wait_for()

    page.get_by_label("Agent").select_option("scout")
    canvas(page).get_by_text("Nothing on the canvas yet").wait_for()
    assert canvas(page).locator("article").count() == 0
    page.get_by_text("Start a conversation with Scout").wait_for()

    page.get_by_label("Agent").select_option("buddy")
    canvas(page).get_by_role("heading", name="Buddy's card").wait_for()
    log(page).get_by_text("Buddy's card").first.wait_for()  # the CANVAS prompt, from /history


def test_a_confirmation_answer_marks_it_answered(logged_in_page):
    page = logged_in_page
    send_and_wait(
        page,
        canvas_prompt(
            (
                "canvas_show_confirmation",
                {
                    "id": "ship",
                    "title": "Ship the release?",
                    "message": "Version 2.0 goes live.",
                    "confirm_label": "Ship",
                },
            )
        ),
    )
    article = canvas(page).get_by_role("article", name="Ship the release?")
    assert article.get_by_role("button").all_inner_texts() == ["Ship", "Cancel"]
    article.get_by_role("button", name="Ship").click()
    article.get_by_text("Confirmed").wait_for()
    assert article.get_attribute("data-answered") == "confirmed"
    assert article.get_by_role("button").count() == 0
    # The answer runs as a turn; every tab sees it start, shown as an answer, not as typed text.
    answer = log(page).locator('.msg-user[data-kind="confirmation"]')
    answer.get_by_text("✓ Confirmed (ship)").wait_for()
    assert answer.locator(".msg-bubble").text_content() == "Confirmation answer: ✓ Confirmed (ship)"
    page.wait_for_function("() => document.getElementById('composer').dataset.running === 'false'")

    page.reload()
    canvas(page).get_by_role("article", name="Ship the release?").get_by_text("Confirmed").wait_for()
    answer.get_by_text("✓ Confirmed (ship)").wait_for()


def test_a_chart_and_a_table_render_with_their_titles(logged_in_page):
    page = logged_in_page
    send_and_wait(
        page,
        canvas_prompt(
            (
                "canvas_show_chart",
                {
                    "id": "rain",
                    "title": "Rainfall (mm)",
                    "chart_type": "bar",
                    "labels": ["Jan", "Feb", "Mar"],
                    "series": [
                        {"name": "Bergen", "values": [190, 150, 160]},
                        {"name": "Oslo", "values": [50, 35, 45]},
                    ],
                },
            ),
            (
                "canvas_show_table",
                {
                    "id": "cities",
                    "title": "Cities",
                    "columns": ["City", "Country"],
                    "rows": [["Bergen", "Norway"], ["Lyon", "France"]],
                },
            ),
            ("canvas_show_notification", {"message": "Two things added", "level": "success"}),
        ),
    )
    chart = canvas(page).get_by_role("article", name="Rainfall (mm)")
    chart.wait_for()
    svg = chart.locator("svg[role=img]")
    assert svg.locator(":scope > title").text_content() == "Rainfall (mm)"
    assert svg.locator(".chart-legend-label").all_text_contents() == ["Bergen", "Oslo"]
    assert chart.locator(".chart-marks rect").count() == 6
    table = canvas(page).get_by_role("article", name="Cities")
    assert table.locator("th").all_inner_texts() == ["City", "Country"]
    assert table.locator("tbody tr").count() == 2
    page.locator(".toast", has_text="Two things added").wait_for()
    assert canvas(page).locator("article").count() == 2  # the notification is not an element


def test_theme_from_the_canvas_applies_to_the_page(logged_in_page):
    page = logged_in_page
    send_and_wait(page, canvas_prompt(("canvas_set_theme", {"theme": "dark"})))
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    page.reload()
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")


def test_model_output_is_shown_as_text_and_runs_nothing(logged_in_page):
    page = logged_in_page
    send_and_wait(page, f"Please repeat this exactly: {XSS_PAYLOAD}")
    send_and_wait(
        page,
        canvas_prompt(("canvas_add_card", {"id": "x", "title": f"Card {XSS_PAYLOAD}", "body": XSS_PAYLOAD})),
    )
    canvas(page).get_by_role("heading", name=f"Card {XSS_PAYLOAD}").wait_for()
    page.wait_for_timeout(300)  # give any injected handler every chance to run
    assert page.evaluate(f"window.{XSS_FLAG}") is None
    # The offline model echoes the prompt: the reply holds the payload, as text.
    replies = log(page).locator(".msg-assistant .msg-text").all_inner_texts()
    assert any("onerror=" in reply and "<script>" in reply for reply in replies)
    assert log(page).locator(".msg-user .msg-text", has_text="<script>").count() >= 1
    for container in ("#conversation", "#canvas"):
        assert page.locator(f"{container} script, {container} img[src='x']").count() == 0

    page.reload()
    canvas(page).get_by_role("heading", name=f"Card {XSS_PAYLOAD}").wait_for()
    log(page).get_by_text("Please repeat this exactly").first.wait_for()
    page.wait_for_timeout(300)
    assert page.evaluate(f"window.{XSS_FLAG}") is None


def test_another_tab_sees_the_prompt_the_reply_and_the_canvas(logged_in_page, live_server_url):
    page = logged_in_page
    other = page.context.new_page()
    other.goto(f"{live_server_url}/")
    other.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    send_and_wait(page, canvas_prompt(("canvas_add_card", {"id": "shared", "title": "Seen everywhere"})))
    log(other).get_by_text("Seen everywhere").first.wait_for()  # the user_message frame
    canvas(other).get_by_role("heading", name="Seen everywhere").wait_for()
    other.close()


def test_a_new_chat_starts_empty_and_is_listed(logged_in_page):
    page = logged_in_page
    send_and_wait(page, "This is the main chat.")
    page.get_by_role("button", name="New chat").click()
    page.get_by_text("Start a conversation with Buddy").wait_for()
    new_chat_id = re.search(r"chat_id=([^&]+)", page.url).group(1)
    assert new_chat_id != "main" and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", new_chat_id)
    send_and_wait(page, "This is the new chat.")
    assert log(page).get_by_text("This is the main chat.", exact=True).count() == 0

    chats = page.get_by_role("navigation", name="Chats")
    chats.get_by_role("link", name=re.compile("^This is the main chat")).click()
    log(page).get_by_text("This is the main chat.", exact=True).wait_for()
    assert log(page).get_by_text("This is the new chat.", exact=True).count() == 0
    chats.get_by_role("link", name=re.compile("^This is the new chat")).wait_for()
