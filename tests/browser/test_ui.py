"""The browser UI in a real chromium: the page, the login, the reducer and renderer modules, and the
client's side of the WebSocket protocol (README, "HTTP API"; web/consumers.py) against an in-test fake server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devtools.servers import ROOT
from tests.browser.conftest import canvas_frame, clear_frame

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "screenshot.png"
XSS_FLAG = "buddyPwned"
XSS_PAYLOAD = (
    f'<img src=x onerror="window.{XSS_FLAG}=1"><script>window.{XSS_FLAG}=2</script>'
    f'<svg onload="window.{XSS_FLAG}=3"></svg>'
)


def import_module(page, path: str, body: str):
    """Runs `body` (an async function body) with the module at `path` bound as `m`."""
    return page.evaluate(f"async () => {{ const m = await import('{path}'); {body} }}")


def history_route(pages: dict[str | None, dict]):
    """A /history handler answering by `before` (None: the newest page), recording each request."""
    requests: list[str] = []

    def handle(route):
        url = route.request.url
        requests.append(url)
        match = re.search(r"[?&]before=(\d+)", url)
        key = match.group(1) if match else None
        page_data = pages.get(key)
        if page_data is None:
            route.fulfill(status=404, content_type="application/json", body=json.dumps({"detail": "Not found"}))
        else:
            route.fulfill(status=200, content_type="application/json", body=json.dumps(page_data))

    return handle, requests


def route_chats(page, *chats: tuple[str, str]) -> None:
    """Answer /chats with these (agent, chat_id) chats: the page asks a chat's history only when it exists."""
    body = [
        {"agent": agent, "chat_id": chat_id, "title": "", "last_message_at": "2025-01-01T12:00:00Z", "messages": 1}
        for agent, chat_id in chats
    ]
    page.route(
        re.compile(r"/chats$"), lambda route: route.fulfill(content_type="application/json", body=json.dumps(body))
    )


def text_message(message_id: int, role: str, text: str) -> dict:
    return {
        "id": message_id,
        "role": role,
        "content": [{"type": "text", "text": text}],
        "created_at": "2025-01-01T12:00:00Z",
    }


# --- login, the page, logout ------------------------------------------------------------------


def test_login_page_is_styled_and_signs_in(page, live_server_url, user):
    page.goto(f"{live_server_url}/")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/$"))

    card = page.locator(".auth-card")
    assert card.evaluate("node => getComputedStyle(node).borderTopLeftRadius") == "18px"
    assert "system-ui" in page.evaluate("getComputedStyle(document.body).fontFamily")
    assert page.get_by_role("heading", name="Sign in").is_visible()

    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "correct username and password" in alert.inner_text()
    assert "/accounts/login/" in page.url

    page.get_by_label("Password").fill("wonderland-pass-1")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(live_server_url) + r"/(\?.*)?$"))
    assert page.get_by_label("Message").is_visible()


def test_page_has_message_box_send_agent_picker_canvas_and_log(scout_agent, logged_in_page):
    page = logged_in_page
    message = page.get_by_label("Message")
    assert message.evaluate("node => node.tagName") == "TEXTAREA"
    assert page.get_by_role("button", name="Send").is_visible()
    assert page.get_by_role("log").count() == 1

    picker = page.get_by_label("Agent")
    page.wait_for_function("() => document.querySelectorAll('#agent option').length === 2")
    options = picker.locator("option").all_inner_texts()
    assert [option.split()[-1] for option in options] == ["Buddy", "Scout"]
    assert picker.input_value() == "buddy"

    canvas = page.get_by_role("region", name="Canvas")
    assert canvas.is_visible()
    assert canvas.get_by_text("Nothing on the canvas yet").is_visible()
    assert page.get_by_text("Start a conversation with Buddy").is_visible()

    # The server runs with BUDDY_LLM=offline: the page says so.
    assert page.get_by_text("Offline demo mode").is_visible()
    assert page.get_by_text("Alice", exact=True).is_visible()


def test_logout_posts_the_form_and_ends_the_session(logged_in_page, live_server_url):
    page = logged_in_page
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/accounts/login/"))
    page.goto(f"{live_server_url}/")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/$"))


# --- the reducer module ----------------------------------------------------------------------


def test_reducer_has_the_servers_semantics(page, live_server_url):
    page.goto(f"{live_server_url}/accounts/login/")
    result = import_module(
        page,
        "/static/buddy/reducer.js",
        """
        const deepFreeze = (value) => {
          if (value && typeof value === "object") {
            Object.values(value).forEach(deepFreeze);
            Object.freeze(value);
          }
          return value;
        };
        const step = (state, command, params) =>
          deepFreeze(m.reduce(deepFreeze(state), command, deepFreeze(params)));
        const out = {};
        let s = m.emptyState();
        s = step(s, "canvas_add_card", {id: "a", title: "A", body: "first"});
        s = step(s, "canvas_show_text", {id: "b", content: "bee"});
        s = step(s, "canvas_show_table", {id: "c", title: "C", columns: ["x"], rows: [[1]]});
        out.added = s.elements.map(e => [e.id, e.type]);
        s = step(s, "canvas_add_card", {id: "b", title: "B again"});
        out.replaced = s.elements.map(e => [e.id, e.type, e.title ?? null, e.content ?? null]);
        s = step(s, "canvas_update_card", {id: "a", title: "A2"});
        out.updated = s.elements[0];
        const before = s;
        out.unknownUpdateIsNoop = step(s, "canvas_update_card", {id: "nope", title: "x"}) === before;
        out.unknownCommandIsNoop = step(s, "canvas_fly_to_the_moon", {id: "a"}) === before;
        out.addWithoutIdIsNoop = step(s, "canvas_add_card", {title: "no id"}) === before;
        s = step(s, "canvas_remove_element", {id: "c"});
        out.removed = s.elements.map(e => e.id);
        const themed = step(s, "canvas_set_theme", {theme: "dark"});
        out.theme = themed.theme;
        out.themeKeepsElements = themed.elements.length;
        const notified = step(themed, "canvas_show_notification", {message: "hi", level: "info"});
        out.notificationIsNotStored = notified === themed && !JSON.stringify(notified).includes("hi");
        s = step(themed, "canvas_set_mode", {mode: "clear"});
        out.cleared = {count: s.elements.length, mode: s.mode, theme: s.theme};
        s = step(s, "canvas_play_media", {id: "m", url: "/x.png", media_type: "image"});
        out.afterClear = {mode: s.mode, ids: s.elements.map(e => e.id), type: s.elements[0].type};
        const confirmation = step(
          m.emptyState(), "canvas_show_confirmation", {id: "q", title: "Sure?", message: "Go"});
        out.answered = step(confirmation, "canvas_update_card", {id: "q", answered: "confirmed"}).elements[0];
        const asked = step(step(confirmation, "canvas_add_card", {id: "a", title: "A"}), "canvas_show_confirmation",
          {id: "memory-1", title: "Remember in all chats?", message: "likes tea"});
        out.keptByClear = step(asked, "canvas_set_mode", {mode: "clear", keep: ["memory-1"]}).elements.map(e => e.id);
        const chart = {id: "ch", title: "T", chart_type: "pie", labels: [], series: []};
        out.chartType = step(m.emptyState(), "canvas_show_chart", chart).elements[0].type;
        return out;
        """,
    )
    assert result["added"] == [["a", "card"], ["b", "text"], ["c", "table"]]
    # Replace in place: same position, the old element's fields gone, the new type.
    assert result["replaced"] == [
        ["a", "card", "A", None],
        ["b", "card", "B again", None],
        ["c", "table", "C", None],
    ]
    assert result["updated"] == {"id": "a", "title": "A2", "body": "first", "type": "card"}
    assert result["unknownUpdateIsNoop"] and result["unknownCommandIsNoop"] and result["addWithoutIdIsNoop"]
    assert result["removed"] == ["a", "b"]
    assert result["theme"] == "dark" and result["themeKeepsElements"] == 2
    assert result["notificationIsNotStored"]
    assert result["cleared"] == {"count": 0, "mode": "clear", "theme": "dark"}
    assert result["afterClear"] == {"mode": "content", "ids": ["m"], "type": "media"}
    assert result["answered"]["answered"] == "confirmed" and result["answered"]["type"] == "confirmation"
    assert result["keptByClear"] == ["memory-1"]  # the server's pending question outlives a clear
    assert result["chartType"] == "chart"


# --- the renderer ----------------------------------------------------------------------------

EVERY_ELEMENT = [
    {"type": "card", "id": "card", "title": "Shopping list", "body": "Milk, **eggs** and `bread`"},
    {"type": "text", "id": "text", "title": "A poem", "content": "Roses are **red**\n  violets are blue"},
    {
        "type": "chart",
        "id": "line",
        "title": "Temperature",
        "chart_type": "line",
        "labels": ["Mon", "Tue", "Wed"],
        "series": [{"name": "Oslo", "values": [3, 5, 4]}, {"name": "Rome", "values": [14, 16, 15]}],
    },
    {
        "type": "chart",
        "id": "bar",
        "title": "Sales",
        "chart_type": "bar",
        "labels": ["Q1", "Q2"],
        "series": [{"name": "Widgets", "values": [10, -4]}],
    },
    {
        "type": "chart",
        "id": "pie",
        "title": "Budget",
        "chart_type": "pie",
        "labels": ["Rent", "Food", "Fun"],
        "series": [{"name": "EUR", "values": [900, 400, 200]}],
    },
    {
        "type": "table",
        "id": "table",
        "title": "Planets",
        "columns": ["Name", "Moons"],
        "rows": [["Mars", 2], ["Earth", 1]],
    },
    {
        "type": "media",
        "id": "img",
        "title": "Logo",
        "url": "/static/buddy/favicon.svg",
        "media_type": "image",
    },
    {
        "type": "media",
        "id": "audio",
        "title": "Chime",
        "url": "https://example.test/a.mp3",
        "media_type": "audio",
    },
    {
        "type": "media",
        "id": "video",
        "title": "Clip",
        "url": "https://example.test/v.mp4",
        "media_type": "video",
    },
    {"type": "media", "id": "evil", "title": "Evil", "url": "javascript:alert(1)", "media_type": "image"},
    {"type": "confirmation", "id": "ask", "title": "Delete the file?", "message": "This cannot be undone."},
    {
        "type": "confirmation",
        "id": "asked",
        "title": "Book the table?",
        "message": "For two.",
        "confirm_label": "Book it",
        "cancel_label": "Not now",
        "answered": "declined",
    },
]


def render_state(page, state) -> None:
    page.evaluate(
        """async (state) => {
          const m = await import('/static/buddy/canvas.js');
          let root = document.getElementById('test-canvas');
          if (!root) {
            root = document.createElement('div');
            root.id = 'test-canvas';
            document.body.append(root);
          }
          window.__confirmations = [];
          const onConfirm = (id, confirmed) => window.__confirmations.push([id, confirmed]);
          m.renderCanvas(root, state, {onConfirm});
        }""",
        state,
    )


def test_renderer_draws_every_element_type_headed_by_its_title(page, live_server_url):
    page.goto(f"{live_server_url}/accounts/login/")
    render_state(page, {"elements": [], "theme": ""})
    root = page.locator("#test-canvas")
    assert root.get_by_text("Nothing on the canvas yet").is_visible()

    render_state(page, {"elements": EVERY_ELEMENT, "theme": ""})
    articles = root.locator("article")
    assert articles.count() == len(EVERY_ELEMENT)
    for element in EVERY_ELEMENT:
        article = root.locator(f'article[data-id="{element["id"]}"]')
        heading = article.locator("h2, h3").first
        assert heading.inner_text() == element["title"]
        # The article is named by its heading for assistive technology.
        assert article.get_attribute("aria-labelledby") == heading.get_attribute("id")

    card = root.locator('article[data-id="card"]')
    assert card.locator("strong").inner_text() == "eggs" and card.locator("code").inner_text() == "bread"
    # Text is Markdown too: emphasis renders, a line break stays one.
    poem = root.locator('article[data-id="text"] .el-body')
    assert poem.inner_text() == "Roses are red\nviolets are blue" and poem.locator("strong").inner_text() == "red"

    for chart_id, title, legend in [
        ("line", "Temperature", ["Oslo", "Rome"]),
        ("bar", "Sales", ["Widgets"]),
        ("pie", "Budget", ["Rent", "Food", "Fun"]),
    ]:
        svg = root.locator(f'article[data-id="{chart_id}"] svg[role="img"]')
        assert svg.locator(":scope > title").text_content() == title
        assert svg.locator(".chart-legend-label").all_text_contents() == legend
    assert root.locator('article[data-id="line"] polyline').count() == 2
    line_ticks = root.locator('article[data-id="line"] .chart-tick').all_text_contents()
    assert {"Mon", "Tue", "Wed"} <= set(line_ticks) and "0" in line_ticks
    assert root.locator('article[data-id="bar"] .chart-marks rect').count() == 2
    assert root.locator('article[data-id="pie"] path.chart-slice').count() == 3
    assert "60%" in root.locator('article[data-id="pie"]').text_content()  # 900 of 1500

    table = root.locator('article[data-id="table"] table')
    assert table.locator("th").all_inner_texts() == ["Name", "Moons"]
    assert table.locator("tbody tr").nth(0).locator("td").all_inner_texts() == ["Mars", "2"]

    assert root.locator('article[data-id="img"] img').get_attribute("alt") == "Logo"
    assert root.locator('article[data-id="audio"] audio[controls]').count() == 1
    assert root.locator('article[data-id="video"] video[controls]').count() == 1
    evil = root.locator('article[data-id="evil"]')
    assert evil.locator("img").count() == 0 and "can't be shown" in evil.inner_text()

    ask = root.locator('article[data-id="ask"]')
    assert ask.get_by_role("button").all_inner_texts() == ["Confirm", "Cancel"]
    ask.get_by_role("button", name="Cancel").click()
    # The click's handler may run after click() returns on a loaded machine: wait for it, then compare.
    page.wait_for_function("window.__confirmations.length > 0", timeout=5000)
    assert page.evaluate("window.__confirmations") == [["ask", False]]
    asked = root.locator('article[data-id="asked"]')
    assert asked.get_by_role("button").count() == 0
    assert "Declined" in asked.inner_text() and "Not now" in asked.inner_text()


def test_renderer_keeps_unchanged_elements_and_follows_the_order(page, live_server_url):
    page.goto(f"{live_server_url}/accounts/login/")
    first = {"type": "card", "id": "one", "title": "One"}
    second = {"type": "card", "id": "two", "title": "Two"}
    render_state(page, {"elements": [first, second]})
    page.evaluate("window.__one = document.querySelector('#test-canvas article[data-id=one]')")
    render_state(
        page,
        {"elements": [first, {**second, "title": "Two!"}, {"type": "card", "id": "three", "title": "3"}]},
    )
    assert page.evaluate("window.__one === document.querySelector('#test-canvas article[data-id=one]')")
    assert page.locator("#test-canvas article h3").all_inner_texts() == ["One", "Two!", "3"]
    render_state(page, {"elements": [{"type": "card", "id": "three", "title": "3"}, first]})
    assert page.locator("#test-canvas article h3").all_inner_texts() == ["3", "One"]


def test_markdown_renders_safely(page, live_server_url):
    page.goto(f"{live_server_url}/accounts/login/")
    html = import_module(
        page,
        "/static/buddy/markdown.js",
        """
        const box = document.createElement('div');
        box.append(m.renderMarkdown([
          "Hello **bold** and *em* and `x<y>`",
          "",
          "- one",
          "- two [site](https://example.test/a?b=1)",
          "",
          "1. first",
          "2. [bad](javascript:alert(1))",
          "",
          "```js",
          "<b>not bold</b>",
          "```",
        ].join("\\n")));
        return box.innerHTML;
        """,
    )
    assert "<strong>bold</strong>" in html and "<em>em</em>" in html and "<code>x&lt;y&gt;</code>" in html
    assert "<li>one</li>" in html and 'href="https://example.test/a?b=1"' in html
    assert 'rel="noopener noreferrer"' in html
    assert "<li>bad</li>" in html and "javascript:" not in html  # an unsafe link is its text
    assert '<code class="hljs language-js" data-language="js">&lt;b&gt;not bold&lt;/b&gt;</code>' in html


# --- the page against a fake server (web/consumers.py) -----------------------------------------


def test_model_text_never_runs_as_html(fake_ws, logged_in_page):
    page = logged_in_page
    handle, _ = history_route(
        {
            None: {
                "messages": [text_message(1, "assistant", f"From history {XSS_PAYLOAD}")],
                "next_before": None,
            }
        }
    )
    route_chats(page, ("buddy", "main"))
    page.route(re.compile(r"/history\?"), handle)
    page.reload()
    fake_ws.wait_for_connections(2)
    fake_ws.send(
        canvas_frame("canvas_add_card", {"id": "x1", "title": f"Title {XSS_PAYLOAD}", "body": XSS_PAYLOAD}, 1),
        canvas_frame("canvas_show_text", {"id": "x2", "content": XSS_PAYLOAD}, 2),
        canvas_frame(
            "canvas_show_table",
            {"id": "x3", "title": "T", "columns": [XSS_PAYLOAD], "rows": [[XSS_PAYLOAD]]},
            3,
        ),
        canvas_frame(
            "canvas_show_chart",
            {
                "id": "x4",
                "title": XSS_PAYLOAD,
                "chart_type": "bar",
                "labels": [XSS_PAYLOAD],
                "series": [{"name": XSS_PAYLOAD, "values": [1]}],
            },
            4,
        ),
        canvas_frame(
            "canvas_show_confirmation",
            {"id": "x5", "title": "Q", "message": XSS_PAYLOAD, "confirm_label": XSS_PAYLOAD},
            5,
        ),
        canvas_frame("canvas_show_notification", {"message": XSS_PAYLOAD}),
        {"type": "user_message", "text": f"Other tab {XSS_PAYLOAD}", "message_id": 7},
        {"type": "assistant_delta", "text": "Streaming <script>"},
        {
            "type": "assistant_message",
            "text": f"Reply {XSS_PAYLOAD} [x](javascript:alert(1))",
            "message_id": 8,
        },
    )
    log = page.get_by_role("log")
    log.get_by_text("Reply <img src=x").wait_for()
    page.get_by_role("region", name="Canvas").locator("article").nth(4).wait_for()
    page.wait_for_timeout(300)  # give any injected handler every chance to run

    assert page.evaluate(f"window.{XSS_FLAG}") is None
    assert log.get_by_text(f"From history {XSS_PAYLOAD}").count() == 1
    assert log.get_by_text(f"Other tab {XSS_PAYLOAD}").count() == 1
    canvas = page.get_by_role("region", name="Canvas")
    assert canvas.get_by_role("heading", name=f"Title {XSS_PAYLOAD}").count() == 1
    assert page.get_by_text(XSS_PAYLOAD, exact=True).count() >= 4
    for container in ("#conversation", "#canvas", "#toasts"):
        injected = page.locator(f"{container} script, {container} img[src='x'], {container} svg[onload]")
        assert injected.count() == 0
    assert page.locator("#conversation a[href^='javascript']").count() == 0


def test_enter_sends_shift_enter_adds_a_line_and_the_reply_streams(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    message = page.get_by_label("Message")
    message.click()
    message.type("first line")
    message.press("Shift+Enter")
    message.type("second line")
    assert message.input_value() == "first line\nsecond line"
    assert fake_ws.frames("prompt") == []

    message.press("Enter")
    assert fake_ws.wait_for_frame("prompt") == {"type": "prompt", "text": "first line\nsecond line"}
    assert message.input_value() == ""
    log = page.get_by_role("log")
    assert log.locator(".msg-user .msg-text").inner_text() == "first line\nsecond line"
    stop = page.get_by_role("button", name="Stop")
    assert stop.is_visible() and page.get_by_role("button", name="Send").is_disabled()

    fake_ws.send({"type": "user_message", "text": "first line\nsecond line", "message_id": 41})
    fake_ws.send({"type": "assistant_delta", "text": "Hello "}, {"type": "assistant_delta", "text": "**wor"})
    log.get_by_text("Hello").wait_for()
    fake_ws.send({"type": "assistant_delta", "text": "ld**"})
    log.locator(".msg-assistant strong", has_text="world").wait_for()

    stop.click()
    assert fake_ws.wait_for_frame("cancel") == {"type": "cancel"}
    fake_ws.send({"type": "assistant_message", "text": "Hello **world**, done.", "message_id": 42})
    log.get_by_text("done.").wait_for()
    assert log.locator(".msg-user").count() == 1  # our prompt, not repeated by user_message
    assert log.locator(".msg-assistant").count() == 1
    assert log.locator(".msg-assistant").get_attribute("data-message-id") == "42"
    assert not stop.is_visible()
    assert page.get_by_role("button", name="Send").is_enabled()

    # A prompt typed in another tab shows here too.
    fake_ws.send({"type": "user_message", "text": "from my phone", "message_id": 43})
    log.get_by_text("from my phone").wait_for()
    assert stop.is_visible()


def test_errors_are_shown_clearly(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    message = page.get_by_label("Message")
    message.fill("hello?")
    page.get_by_role("button", name="Send").click()
    fake_ws.wait_for_frame("prompt")
    fake_ws.send({"type": "user_message", "text": "hello?", "message_id": 5})
    fake_ws.send({"type": "error", "code": "model_failed", "detail": "The provider answered 529 overloaded."})
    alert = page.get_by_role("log").get_by_role("alert")
    alert.wait_for()
    assert "The model provider failed" in alert.inner_text()
    assert "529 overloaded" in alert.inner_text()
    assert not page.get_by_role("button", name="Stop").is_visible()

    # A prompt refused while a turn runs is not archived: the text comes back to the box.
    message.fill("again")
    page.get_by_role("button", name="Send").click()
    fake_ws.wait_for_frame("prompt", count=2)
    fake_ws.send({"type": "error", "code": "turn_running", "detail": "A turn is running."})
    page.get_by_role("log").get_by_text("A reply is still being written").wait_for()
    assert message.input_value() == "again"
    assert page.get_by_role("log").get_by_text("again", exact=True).count() == 0


def test_confirmation_buttons_answer_and_show_answered(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.on_connect = lambda index: [
        clear_frame(3),
        canvas_frame(
            "canvas_show_confirmation",
            {
                "id": "rm",
                "title": "Delete report.pdf?",
                "message": "It goes to the bin.",
                "confirm_label": "Delete it",
            },
            3,
        ),
    ]
    page.reload()
    canvas = page.get_by_role("region", name="Canvas")
    article = canvas.get_by_role("article", name="Delete report.pdf?")
    article.get_by_role("button", name="Delete it").click()
    answer = fake_ws.wait_for_frame("confirmation_response")
    assert answer == {"type": "confirmation_response", "id": "rm", "confirmed": True}
    assert article.get_by_role("button", name="Delete it").is_disabled()

    fake_ws.send(canvas_frame("canvas_update_card", {"id": "rm", "answered": "confirmed"}, 4))
    article.get_by_text("Confirmed").wait_for()
    assert article.get_by_role("button").count() == 0
    assert article.get_attribute("data-answered") == "confirmed"


def test_version_gap_asks_for_a_replay(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.on_connect = lambda index: [
        clear_frame(3),
        canvas_frame("canvas_add_card", {"id": "a", "title": "Alpha"}, 3),
    ]
    page.reload()
    canvas = page.get_by_role("region", name="Canvas")
    canvas.get_by_role("heading", name="Alpha").wait_for()
    fake_ws.send(canvas_frame("canvas_add_card", {"id": "b", "title": "Beta"}, 4))
    canvas.get_by_role("heading", name="Beta").wait_for()
    # A notification moves the version too (it is never stored): no gap after it.
    fake_ws.send(canvas_frame("canvas_show_notification", {"message": "Two cards"}, 5))
    fake_ws.send(canvas_frame("canvas_add_card", {"id": "c", "title": "Gamma"}, 6))
    canvas.get_by_role("heading", name="Gamma").wait_for()
    # A frame at a version already shown (e.g. right after a replay that held it) changes nothing.
    fake_ws.send(canvas_frame("canvas_add_card", {"id": "b", "title": "Beta"}, 4))
    assert fake_ws.frames("replay") == []

    fake_ws.send(canvas_frame("canvas_add_card", {"id": "d", "title": "Delta"}, 8))  # 7 went missing
    assert fake_ws.wait_for_frame("replay") == {"type": "replay"}
    assert canvas.get_by_role("heading", name="Delta").count() == 0
    fake_ws.send(
        clear_frame(8),
        canvas_frame("canvas_add_card", {"id": "a", "title": "Alpha"}, 8),
        canvas_frame("canvas_add_card", {"id": "c", "title": "Gamma"}, 8),
        canvas_frame("canvas_add_card", {"id": "e", "title": "Epsilon"}, 8),
        canvas_frame("canvas_add_card", {"id": "d", "title": "Delta"}, 8),
    )
    canvas.get_by_role("heading", name="Delta").wait_for()
    assert canvas.locator("article h3").all_inner_texts() == ["Alpha", "Gamma", "Epsilon", "Delta"]
    fake_ws.send(canvas_frame("canvas_remove_element", {"id": "c"}, 9))
    page.wait_for_function("() => document.querySelectorAll('#canvas article').length === 3")
    assert len(fake_ws.frames("replay")) == 1


def test_reconnects_after_the_connection_drops_and_replays(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.on_connect = lambda index: [
        clear_frame(index + 1),
        canvas_frame("canvas_add_card", {"id": "n", "title": f"Connection {index}"}, index + 1),
    ]
    page.reload()
    canvas = page.get_by_role("region", name="Canvas")
    canvas.get_by_role("heading", name="Connection 1").wait_for()  # connection 0 was before the reload
    fake_ws.close()
    canvas.get_by_role("heading", name="Connection 2").wait_for()
    assert canvas.locator("article").count() == 1
    assert page.locator("#connection").get_attribute("data-status") == "open"
    assert all("agent=buddy" in url and "chat_id=main" in url for url in fake_ws.urls)


def test_notification_toast_goes_away_and_themes_apply(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    fake_ws.send(canvas_frame("canvas_show_notification", {"message": "Saved your list", "level": "success"}))
    toast = page.locator(".toast", has_text="Saved your list")
    toast.wait_for()
    assert toast.get_attribute("data-level") == "success"
    assert page.get_by_role("region", name="Canvas").get_by_text("Nothing on the canvas yet").is_visible()
    toast.wait_for(state="detached", timeout=15_000)

    def background() -> str:
        return page.evaluate("getComputedStyle(document.body).backgroundColor")

    fake_ws.send(canvas_frame("canvas_set_theme", {"theme": "dark"}, 1))
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    dark = background()
    fake_ws.send(canvas_frame("canvas_set_theme", {"theme": "light"}, 2))
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    light = background()
    assert dark != light
    channels = [int(value) for value in re.findall(r"\d+", dark)[:3]]
    assert sum(channels) < 150  # dark really is dark
    fake_ws.send(canvas_frame("canvas_set_theme", {"theme": "neon-zebra"}, 3))
    page.wait_for_function("() => !('theme' in document.documentElement.dataset)")
    assert page.get_by_label("Message").is_visible()


def test_switching_agent_sends_switch_agent_and_shows_that_conversation(scout_agent, fake_ws, logged_in_page):
    page = logged_in_page
    handle, requests = history_route(
        {None: {"messages": [text_message(9, "user", "hello scout")], "next_before": None}}
    )
    fake_ws.on_connect = lambda index: [
        clear_frame(2),
        canvas_frame("canvas_add_card", {"id": "k", "title": "Buddy's card"}, 2),
    ]
    route_chats(page, ("buddy", "main"), ("scout", "main"))
    page.route(re.compile(r"/history\?"), handle)
    page.reload()
    canvas = page.get_by_role("region", name="Canvas")
    canvas.get_by_role("heading", name="Buddy's card").wait_for()
    page.wait_for_function("() => document.querySelectorAll('#agent option').length === 2")

    page.get_by_label("Agent").select_option("scout")
    assert fake_ws.wait_for_frame("switch_agent") == {"type": "switch_agent", "agent": "scout"}
    fake_ws.send({"type": "agent_switch", "agent": {"id": "scout", "name": "Scout", "avatar": "🧭"}}, clear_frame(0))
    canvas.get_by_text("Nothing on the canvas yet").wait_for()
    page.get_by_role("log").get_by_text("hello scout").wait_for()
    assert any("agent=scout" in url and "chat_id=main" in url for url in requests)
    assert page.title().startswith("Scout")
    assert len(fake_ws.connections) == 2  # switched on the same socket, no reconnect


def test_new_chat_reconnects_with_a_new_chat_id(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    page.get_by_role("button", name="New chat").click()
    fake_ws.wait_for_connections(2)
    match = re.search(r"chat_id=([^&]+)", fake_ws.urls[-1])
    assert match and match.group(1) != "main" and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", match.group(1))
    assert page.locator(".chat-link[aria-current=page]").get_attribute("href").endswith(f"chat_id={match.group(1)}")
    assert page.get_by_label("Message").evaluate("node => node === document.activeElement")


def test_history_loads_and_earlier_messages_load_on_scroll(fake_ws, logged_in_page):
    page = logged_in_page
    newest = [text_message(i, "user" if i % 2 else "assistant", f"message {i}") for i in range(51, 101)]
    newest[-2] = {
        "id": 99,
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Putting it up."},
            {"type": "tool_use", "id": "tu1", "name": "canvas_add_card", "input": {"id": "a", "title": "A"}},
        ],
        "created_at": "2025-01-01T12:00:00Z",
    }
    newest[-1] = {
        "id": 100,
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "ok"}],
        "created_at": "2025-01-01T12:00:00Z",
    }
    older = [text_message(i, "user" if i % 2 else "assistant", f"message {i}") for i in range(31, 51)]
    handle, requests = history_route(
        {None: {"messages": newest, "next_before": 51}, "51": {"messages": older, "next_before": None}}
    )
    route_chats(page, ("buddy", "main"))
    page.route(re.compile(r"/history\?"), handle)
    page.reload()
    log = page.get_by_role("log")
    log.get_by_text("message 98").wait_for()
    assert log.locator(".chip", has_text="canvas_add_card").count() == 1
    assert log.locator('[data-message-id="100"]').count() == 0  # tool_result-only: hidden
    assert log.get_by_text("message 50").count() == 0

    page.locator("#log-scroll").evaluate("node => { node.scrollTop = 0; }")
    log.get_by_text("message 31", exact=True).wait_for()
    assert any("before=51" in url for url in requests)
    ids = log.locator("[data-message-id]").evaluate_all("nodes => nodes.map(n => Number(n.dataset.messageId))")
    assert ids == sorted(ids) and ids[0] == 31
    assert page.locator("#load-earlier").is_hidden()


def test_screenshot_of_a_busy_canvas(fake_ws, logged_in_page):
    page = logged_in_page
    page.set_viewport_size({"width": 1440, "height": 1000})
    history = {
        None: {
            "messages": [
                text_message(1, "user", "What's on this week? Show me the numbers too."),
                {
                    "id": 2,
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Here's your week at a glance. I put it on the canvas:"},
                        {"type": "tool_use", "id": "t1", "name": "canvas_add_card", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "canvas_show_chart", "input": {}},
                        {"type": "tool_use", "id": "t3", "name": "canvas_show_table", "input": {}},
                    ],
                    "created_at": "2025-01-01T12:00:00Z",
                },
                {
                    "id": 3,
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                    "created_at": "2025-01-01T12:00:00Z",
                },
                text_message(
                    4,
                    "assistant",
                    "- **Monday**: dentist at 9:30\n- **Wednesday**: team offsite\n"
                    "- **Friday**: `deploy` window\n\nSign-ups are up *18 %* on last week.",
                ),
                text_message(5, "user", "Can you cancel Friday's deploy?"),
                text_message(6, "assistant", "Sure — please confirm on the canvas first."),
            ],
            "next_before": None,
        }
    }
    handle, _ = history_route(history)
    route_chats(page, ("buddy", "main"))
    page.route(re.compile(r"/history\?"), handle)
    fake_ws.on_connect = lambda index: [
        clear_frame(7),
        canvas_frame(
            "canvas_add_card",
            {
                "id": "week",
                "title": "This week",
                "body": "Three things need you: the dentist on **Monday 9:30**, the offsite on Wednesday and "
                "Friday's deploy window.",
            },
            7,
        ),
        canvas_frame(
            "canvas_show_chart",
            {
                "id": "signups",
                "title": "Sign-ups per day",
                "chart_type": "line",
                "labels": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
                "series": [
                    {"name": "This week", "values": [120, 152, 141, 178, 196, 160, 171]},
                    {"name": "Last week", "values": [110, 118, 125, 131, 150, 128, 139]},
                ],
            },
            7,
        ),
        canvas_frame(
            "canvas_show_confirmation",
            {
                "id": "deploy",
                "title": "Cancel Friday's deploy?",
                "message": "The release moves to Monday 10:00.",
                "confirm_label": "Cancel deploy",
                "cancel_label": "Keep it",
            },
            7,
        ),
        canvas_frame(
            "canvas_show_table",
            {
                "id": "plans",
                "title": "Plans by revenue",
                "columns": ["Plan", "Users", "MRR (€)"],
                "rows": [["Starter", 1240, 6200], ["Team", 312, 9360], ["Business", 41, 8200]],
            },
            7,
        ),
        canvas_frame(
            "canvas_show_text",
            {"id": "note", "title": "Note", "content": "Offsite agenda arrives Tuesday.\nBring a laptop."},
            7,
        ),
        canvas_frame(
            "canvas_show_chart",
            {
                "id": "mix",
                "title": "Traffic sources",
                "chart_type": "pie",
                "labels": ["Search", "Direct", "Social", "Email"],
                "series": [{"name": "Visits", "values": [46, 27, 17, 10]}],
            },
            7,
        ),
    ]
    page.reload()
    canvas = page.get_by_role("region", name="Canvas")
    canvas.get_by_role("heading", name="Note").wait_for()
    page.get_by_role("log").get_by_text("please confirm").wait_for()
    page.evaluate("document.fonts.ready")
    page.wait_for_timeout(400)  # let the entry animations finish before the picture
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    assert Path(SCREENSHOT).stat().st_size > 20_000
    assert canvas.locator("article").count() == 6


def test_a_refused_agent_switch_goes_back_to_the_previous_agent(scout_agent, fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    page.wait_for_function("() => document.querySelectorAll('#agent option').length === 2")
    page.get_by_label("Agent").select_option("scout")
    fake_ws.wait_for_frame("switch_agent")
    fake_ws.send({"type": "error", "code": "not_found", "detail": "No agent 'scout'."})
    assert fake_ws.wait_for_frame("replay") == {"type": "replay"}  # to show the previous canvas again
    assert page.get_by_label("Agent").input_value() == "buddy"
    assert page.title().startswith("Buddy")


def test_being_logged_out_elsewhere_leads_to_the_login_page(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    fake_ws.connections[-1].close(code=4401, reason="logged out")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=(/|%2F)$"))


def test_an_unknown_frame_type_is_logged_once_and_the_page_goes_on(fake_ws, logged_in_page):
    page = logged_in_page
    fake_ws.wait_for_connections(1)
    warnings: list[str] = []
    page.on("console", lambda message: message.type == "warning" and warnings.append(message.text))
    fake_ws.send({"type": "typing", "who": "Buddy"}, {"type": "typing"}, {"type": "presence"}, {"type": "typing"})
    fake_ws.send({"type": "user_message", "text": "from my phone", "message_id": 7})
    fake_ws.send({"type": "assistant_message", "text": "Still here.", "message_id": 8})
    page.get_by_role("log").get_by_text("Still here.").wait_for()
    assert len(warnings) == 2, warnings
    assert '"typing"' in warnings[0] and '"presence"' in warnings[1]
