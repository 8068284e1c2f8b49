"""axe-core (vendored for the tests: tests/browser/vendor) finds no serious or critical violation on the
page — with canvas elements, Markdown replies and sources, with the Memory view and a note's history
open, with the search's results shown, light and dark, at 1440 and 390 px — nor on the login page or
the admin's session page.

axe is injected into a browser context made with `bypass_csp=True`: the page's Content-Security-Policy
refuses inline script, as it should for users; the policy itself is never weakened."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import DEFAULT_TIMEOUT_MS, log_in
from tests.browser.reading_chat import reading_chat

pytestmark = pytest.mark.browser

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
BLOCKING = {"serious", "critical"}


def audited_page(browser: Any, *, width: int, color_scheme: str = "light") -> Any:
    # Reduced motion: canvas elements fade in, and colours audited half-way through the fade fail the
    # contrast check that the settled page passes.
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        locale="en-US",
        bypass_csp=True,
        color_scheme=color_scheme,
        reduced_motion="reduce",
    )
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.js_errors = []
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    return page


def violations(page: Any) -> list[str]:
    """The serious and critical violations axe finds on the page as it is, one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE)
    found = page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ['violations'] });
          return result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
            count: v.nodes.length,
          }));
        }"""
    )
    return [
        f"{v['impact']} {v['id']} ×{v['count']} ({v['help']}): {v['targets']}" for v in found if v["impact"] in BLOCKING
    ]


def test_the_audit_sees_a_violation_when_there_is_one(browser, live_server_url, user):
    page = audited_page(browser, width=1440)
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.evaluate("() => { const b = document.createElement('button'); document.querySelector('main').append(b); }")
    assert any("button-name" in line for line in violations(page))
    page.context.close()


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_page_has_no_serious_violation(browser, live_server_url, user, width, theme):
    from web.services import preferences_set

    reading_chat(user)
    preferences_set(user=user, theme=theme)
    page = audited_page(browser, width=width)
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.wait_for_function("() => document.getElementById('connection').dataset.status === 'open'")
    assert page.evaluate("document.documentElement.dataset.colorScheme") == theme
    page.locator("#canvas article[data-id='buy']").wait_for()
    page.locator("#conversation .msg-sources").wait_for()
    page.locator("#conversation .code-block").first.wait_for()
    assert violations(page) == []

    page.get_by_role("button", name="Memory", exact=True).click()
    card = page.get_by_role("region", name="Memory").get_by_role("article").filter(has_text="plans.md")
    card.get_by_role("button", name="History of /memories/plans.md").click()
    card.get_by_role("list", name="Versions of /memories/plans.md").wait_for()
    assert violations(page) == []

    page.keyboard.press("Control+k")  # the search over all chats, its results open
    page.get_by_role("searchbox", name="Search everything").fill("Lisbon plan")
    page.get_by_role("list", name="Results").get_by_role("link").first.wait_for()
    assert violations(page) == []
    assert page.js_errors == []
    page.context.close()


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_the_login_page_has_no_serious_violation(browser, live_server_url, color_scheme):
    page = audited_page(browser, width=1440, color_scheme=color_scheme)
    page.goto(f"{live_server_url}/accounts/login/")
    page.get_by_label("Username").wait_for()
    assert violations(page) == []
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Sign in").click()  # the form's error shown too
    page.get_by_role("alert").first.wait_for()
    assert violations(page) == []
    page.context.close()


def test_the_admin_session_page_has_no_serious_violation(browser, live_server_url, user):
    from django.contrib.auth import get_user_model

    session = reading_chat(user)["session"]
    get_user_model().objects.create_superuser(username="root", password="root-pass-1", email="r@x.test")
    page = audited_page(browser, width=1440)
    page.goto(f"{live_server_url}/admin/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("root-pass-1")
    page.get_by_role("button", name=re.compile("Log in", re.I)).click()
    page.goto(f"{live_server_url}/admin/conversations/session/{session.pk}/change/")
    page.locator(".buddy-transcript").first.wait_for()
    assert violations(page) == []
    page.context.close()


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_chat_list_its_rename_box_and_its_delete_dialog_have_no_serious_violation(
    browser, live_server_url, user, width, theme
):
    from web.services import preferences_set

    reading_chat(user)
    preferences_set(user=user, theme=theme)
    page = audited_page(browser, width=width)
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    chats = page.get_by_role("navigation", name="Chats")
    if width == 390:
        page.get_by_role("button", name="Chats").click()
    chats.locator(".chat-link").first.wait_for()
    assert violations(page) == []
    chats.locator(".chat-rename-button").first.click()
    chats.get_by_label("Chat name").wait_for()
    assert violations(page) == []
    chats.get_by_label("Chat name").press("Escape")
    chats.locator(".chat-delete-button").first.click()
    page.get_by_role("dialog", name="Delete this chat?").wait_for()
    assert violations(page) == []
    assert page.js_errors == []
    page.context.close()
