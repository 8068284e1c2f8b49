"""Browser fixtures: Debian's chromium driven by Playwright's sync API, against a real daphne process
serving the pytest test database.

- `chromium_path`: skips the browser tests when /usr/bin/chromium is missing — unless CI is set,
  where a missing browser fails loudly (the browser tests must never be skipped silently in CI).
- `browser` / `page`: one chromium per test module, a fresh context (cookies, storage) per test.
  Uncaught JavaScript exceptions on a page fail the test that caused them.
- `live_server_url`: a real `daphne buddy.asgi:application` subprocess (HTTP + WebSocket, static
  files through WhiteNoise) started once per session on a free port, against the test database
  (SQLite file or PostgreSQL test database), with `BUDDY_LLM=offline` and this run's channel-layer
  prefix and REDIS_URL. Tests that use it get `transactional_db`: their writes are committed, so the
  server process sees them, and are flushed afterwards.
- `logged_in_page`: `page` signed in as the `user` fixture through the real login form.
- `scout_agent`: a second agent (slug `scout`), for switching agents.
- `fake_ws`: routes the page's WebSocket to an in-test fake that speaks the WebSocket protocol, for testing the
  client's side of the protocol before (or independently of) the real consumer.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.servers import buddy_server_start, buddy_server_stop, database_url, free_port, wait_until_up

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SERVER_START_TIMEOUT = 60.0
DEFAULT_TIMEOUT_MS = 10_000


# --- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(
                f"CI is set but {CHROMIUM} is missing: install Debian's chromium (apt-get install chromium). "
                "The browser tests must run in CI.",
                pytrace=False,
            )
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); browser tests skipped")
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def playwright_instance(chromium_path: str) -> Iterator[Any]:
    """Module-scoped on purpose: Playwright's sync API keeps an event loop "running" in this thread
    while it is open, which would break async tests that run later in the same session."""
    from playwright.sync_api import sync_playwright

    # The sync API's loop makes Django think the test code runs inside an event loop; the test
    # code's ORM calls are plain synchronous calls, so allow them while Playwright is open only.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            yield playwright
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser(playwright_instance: Any, chromium_path: str) -> Iterator[Any]:
    browser = playwright_instance.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    if errors:
        pytest.fail(f"uncaught JavaScript errors on the page: {errors}", pytrace=False)


# --- the server ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def daphne_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """A real daphne serving the test database, for the whole session. Use `live_server_url`."""
    from django.conf import settings
    from django.db import connection

    with django_db_blocker.unblock():
        url_for_database = database_url(connection.settings_dict)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url_for_database,
        "BUDDY_LLM": "offline",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        # Debug settings serve static files from the finders, without collectstatic.
        "DJANGO_DEBUG": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    log_path = Path(settings.VAR_DIR) / f"test_daphne_{os.getpid()}.log"
    with log_path.open("w") as log:
        process = buddy_server_start(port, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, timeout=SERVER_START_TIMEOUT, log_path=log_path)
        yield url
    finally:
        buddy_server_stop(process)
    log_path.unlink(missing_ok=True)


@pytest.fixture
def live_server_url(daphne_server: str, transactional_db: None) -> Iterator[str]:
    """The base URL of the running daphne; this test's database writes are visible to it.

    Afterwards it waits until the server has finished what the test set going (a turn answering a
    click the test did not wait for) before the flush: on PostgreSQL a TRUNCATE of every table racing
    a turn's transaction can deadlock, and PostgreSQL then cancels the flush, leaving this test's rows
    for the next test."""
    from conversations.services import agent_ensure_default

    # A transactional test flushes every table afterwards, the default agent of the data migration
    # included: make sure it is there, as `make run` does.
    agent_ensure_default()
    yield daphne_server
    server_quiet_wait()


SERVER_QUIET_TIMEOUT = 15.0
SERVER_QUIET_POLLS = 3  # consecutive quiet looks: a turn between two transactions is not yet done


def server_quiet_wait() -> None:
    """Waits (bounded) until no other connection to the test database is running a statement or
    holding a transaction open. PostgreSQL only: SQLite's flush waits for the write lock by itself."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + SERVER_QUIET_TIMEOUT
    quiet = 0
    while quiet < SERVER_QUIET_POLLS and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
                " AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
            )
            busy = cursor.fetchone()[0]
        quiet = 0 if busy else quiet + 1
        if quiet < SERVER_QUIET_POLLS:
            time.sleep(0.05)


@pytest.fixture
def scout_agent(live_server_url: str) -> Any:
    """A second agent; request it before `logged_in_page` so the page's picker lists it."""
    from conversations.models import Agent

    return Agent.objects.create(slug="scout", name="Scout", avatar="🧭", personality="A terse explorer.")


def log_in(page: Any, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(base_url) + r"/(\?.*)?$"))  # the page writes its chat in the address


@pytest.fixture
def logged_in_page(page: Any, live_server_url: str, user: Any) -> Any:
    """`page` signed in as `user` (alice) through the real login form, showing `/`."""
    log_in(page, live_server_url, "alice", "wonderland-pass-1")
    page.get_by_label("Message").wait_for()
    return page


# --- a fake WebSocket server, for the client's side of the protocol ---------------------------------


class FakeSocketServer:
    """Answers the page's `/ws/` connections inside the test. Every connection gets the replay
    `on_connect` returns (default: an empty canvas at version 0), like the real consumer."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.connections: list[Any] = []
        self.urls: list[str] = []
        self.received: list[tuple[int, dict[str, Any]]] = []
        self.on_connect: Callable[[int], list[dict[str, Any]]] = lambda index: [clear_frame(0)]

    def install(self) -> FakeSocketServer:
        self.page.route_web_socket(re.compile(r"/ws/"), self._accept)
        return self

    def _accept(self, route: Any) -> None:
        index = len(self.connections)
        self.connections.append(route)
        self.urls.append(route.url)
        route.on_message(lambda message: self.received.append((index, json.loads(message))))
        for frame in self.on_connect(index):
            route.send(json.dumps(frame))

    def send(self, *frames: dict[str, Any], connection: int = -1) -> None:
        for frame in frames:
            self.connections[connection].send(json.dumps(frame))

    def close(self, connection: int = -1) -> None:
        self.connections[connection].close(code=1011, reason="test drops the connection")

    def frames(self, frame_type: str) -> list[dict[str, Any]]:
        return [frame for _, frame in self.received if frame.get("type") == frame_type]

    def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
        """Lets Playwright process events until `predicate()` is truthy (fails after `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            self.page.wait_for_timeout(25)
        pytest.fail(f"timed out waiting for {what}; received: {self.received}")

    def wait_for_frame(self, frame_type: str, count: int = 1) -> dict[str, Any]:
        return self.wait_for(
            lambda: len(self.frames(frame_type)) >= count and self.frames(frame_type)[count - 1],
            f"{count} {frame_type!r} frame(s) from the page",
        )

    def wait_for_connections(self, count: int) -> None:
        self.wait_for(lambda: len(self.connections) >= count, f"{count} WebSocket connection(s)")


def clear_frame(version: int) -> dict[str, Any]:
    return {
        "type": "canvas_command",
        "command": "canvas_set_mode",
        "params": {"mode": "clear"},
        "version": version,
    }


def canvas_frame(command: str, params: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "canvas_command", "command": command, "params": params}
    if version is not None:
        frame["version"] = version
    return frame


@pytest.fixture
def fake_ws(page: Any) -> FakeSocketServer:
    """Install before the page opens `/` (request it before `logged_in_page`)."""
    return FakeSocketServer(page).install()
