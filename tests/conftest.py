"""Shared fixtures. The environment the suite runs in is pinned by tests/settings.py, which
pytest-django imports before any conftest (a conftest is loaded after Django is set up)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck  # noqa: E402
from hypothesis import settings as hypothesis_settings

from devtools.fake_anthropic import FakeAnthropic

hypothesis_settings.register_profile("ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.register_profile("dev", deadline=None, max_examples=30)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _semantic_windows_forgotten():
    """Semantic search keeps each session's vector window per process, checked by id and count; a test
    database rolled back between tests reuses ids, so every test starts with none cached."""
    yield
    from memory.semantic import windows_forget

    windows_forget()


@pytest.fixture(autouse=True)
def _bursts_forgotten():
    """The summary and vector jobs this process queued lately are kept per session id
    (conversations.bursts); a test database reuses ids, so every test starts with none queued."""
    yield
    from agent.turn import summary_bursts
    from memory.semantic import _vector_bursts

    summary_bursts.clear()
    _vector_bursts.clear()


class FrameCheck:
    """Frames the server sent that its models (realtime/frames.py) do not allow, with where they went."""

    def __init__(self) -> None:
        self.bad: list[str] = []

    def check(self, frame: object, where: str) -> None:
        from pydantic import ValidationError

        from realtime.frames import SERVER_FRAMES

        try:
            SERVER_FRAMES.validate_python(frame)
        except ValidationError as error:
            self.bad.append(f"{where}: {frame!r}\n{error}")


@pytest.fixture(autouse=True)
def frames_checked(monkeypatch) -> Iterator[FrameCheck]:
    """Every frame this process sends during the suite — pushed to a chat's group (realtime.push) or sent
    by a consumer (its replays, answers and errors) — validates against the union of server frames; a
    test that sends another fails. (Frames of the server processes some tests start are theirs.)"""
    from realtime import push
    from web.consumers import CanvasConsumer

    frames = FrameCheck()
    group_send, send_json = push._group_send, CanvasConsumer.send_json

    def checked_group_send(group: str, message: dict, **options) -> None:
        if message.get("type") == "frame":
            frames.check(message.get("frame"), f"pushed to {group}")
        group_send(group, message, **options)

    async def checked_send_json(self, content, close=False):
        frames.check(content, "sent by the consumer")
        await send_json(self, content, close)

    monkeypatch.setattr(push, "_group_send", checked_group_send)
    monkeypatch.setattr(CanvasConsumer, "send_json", checked_send_json)
    yield frames
    if frames.bad:
        pytest.fail("frames that realtime/frames.py does not allow:\n" + "\n".join(frames.bad), pytrace=False)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """One test database per run (by pid), so concurrent runs on one PostgreSQL never collide."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    suffix = f"{os.getpid()}"
    if db["ENGINE"] == "django.db.backends.sqlite3":
        db.setdefault("TEST", {})["NAME"] = str(settings.VAR_DIR / f"test_buddy_{suffix}.sqlite3")
    else:
        db.setdefault("TEST", {})["NAME"] = f"test_buddy_{suffix}"


@pytest.fixture
def fake_anthropic(settings, monkeypatch) -> Iterator[FakeAnthropic]:
    """A started ``FakeAnthropic`` that the app (settings) and subprocesses (environment) use."""
    server = FakeAnthropic().start()
    try:
        settings.BUDDY_LLM = "anthropic"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_API_KEY = "test-key"
        monkeypatch.setenv("BUDDY_LLM", "anthropic")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield server
    finally:
        server.stop()


@pytest.fixture
def model(fake_anthropic, settings):
    """The fake Messages API, answering at once (no retries)."""
    settings.BUDDY_LLM_RETRIES = 0
    return fake_anthropic


@pytest.fixture
def api(client, user):
    """The test client signed in as `user`."""
    client.force_login(user)
    return client


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="wonderland-pass-1", first_name="Alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="builder-pass-1", first_name="Bob")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="root-pass-1", email="r@x.test")


@pytest.fixture
def agent(db):
    from conversations.services import agent_ensure_default

    return agent_ensure_default()


@pytest.fixture(autouse=True)
def _default_agent(request):
    """The default agent comes from a data migration, which a transactional test's flush removes:
    every test that touches the database starts with it, as a fresh installation does."""
    marker = request.node.get_closest_marker("django_db")
    uses_db = marker is not None or {"db", "transactional_db"} & set(request.fixturenames)
    if uses_db:
        request.getfixturevalue("agent")


@pytest.fixture
def session(user, agent):
    from conversations.services import session_get_or_create

    return session_get_or_create(user=user, agent_slug="buddy", chat_id="main")


@pytest.fixture
def helper_agent(db):
    from conversations.models import Agent

    agent, _ = Agent.objects.get_or_create(slug="helper", defaults={"name": "Helper", "avatar": "🦉"})
    return agent
