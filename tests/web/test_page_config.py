"""The page config (web/views.py, `json_script` id `buddy-config`) carries the server's own API paths,
limits and notification levels, and the page's modules (static/buddy) copy none of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import URLResolver, resolve
from django.urls.resolvers import RegexPattern

from buddy.api import api as ninja_api
from canvas.limits import NOTIFICATION_LEVELS
from conversations.models import TITLE_MAX_CHARS
from conversations.refs import CHAT_ID_RE
from memory.notes.paths import NOTE_MAX_BYTES
from realtime.limits import MAX_FRAME_BYTES
from web.consumers import CanvasConsumer
from web.routing import websocket_urlpatterns
from web.views import js_regex_source

pytestmark = pytest.mark.django_db

PAGE_JS = Path(__file__).resolve().parents[2] / "static" / "buddy"

# The ninja operation (buddy/api.py, namespace "api") each API path of the page is meant for.
API_OPERATIONS = {
    "agents": "agents",
    "chats": "chats",
    "chatExport": "chat_export",
    "history": "history",
    "prompt": "prompt",
    "notes": "notes_list",
    "noteVersions": "notes_versions",
    "noteRestore": "notes_restore",
    "preferences": "preferences",
    "search": "search_all",
}


def page_modules() -> dict[str, str]:
    """The page's own modules (libraries vendored under static/buddy/vendor are not the page's)."""
    return {
        str(path.relative_to(PAGE_JS)): path.read_text()
        for path in sorted(PAGE_JS.rglob("*.js"))
        if "vendor" not in path.relative_to(PAGE_JS).parts
    }


def rendered_page(client) -> str:
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def rendered_config(client) -> dict:
    match = re.search(r'<script id="buddy-config" type="application/json">(.*?)</script>', rendered_page(client), re.S)
    assert match, "the page renders no buddy-config"
    return json.loads(match.group(1))


def test_the_config_hands_the_page_the_servers_limits_and_levels(api):
    config = rendered_config(api)
    assert config["limits"] == {
        "frameBytes": MAX_FRAME_BYTES,
        "chatIdPattern": js_regex_source(CHAT_ID_RE),
        "titleChars": TITLE_MAX_CHARS,
        "noteBytes": NOTE_MAX_BYTES,
    }
    assert config["toastLevels"] == list(NOTIFICATION_LEVELS)


@pytest.mark.parametrize(
    "chat_id",
    ["main", "chat-20250101-120000-ab12", "a.b:c_d-e", "x" * 64, "x" * 65, "", "a b", "a/b", "é", "main;drop"],
)
def test_the_pages_chat_id_pattern_accepts_what_the_server_accepts(api, chat_id):
    pattern = rendered_config(api)["limits"]["chatIdPattern"]
    # The JavaScript source is Python syntax too once a named group is spelled the Python way.
    as_python = re.compile(pattern.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!"))
    assert bool(as_python.search(chat_id)) == bool(CHAT_ID_RE.fullmatch(chat_id))


def test_the_config_names_the_api_operations_and_the_socket_the_page_uses(api):
    urls = rendered_config(api)["urls"]
    assert set(urls) == {*API_OPERATIONS, "socket"}
    for key, operation in API_OPERATIONS.items():
        match = resolve(urls[key])
        assert (match.namespace, match.url_name) == ("api", operation), key
    socket_routes = URLResolver(RegexPattern(r"^/"), websocket_urlpatterns)
    assert socket_routes.resolve(urls["socket"]).func.consumer_class is CanvasConsumer
    assert api.get(urls["agents"]).json() == [{"id": "buddy", "name": "Buddy", "avatar": "🤖"}]
    assert api.get(urls["chats"]).json() == []


def test_every_path_and_limit_of_the_config_is_read_by_the_page(api):
    config = rendered_config(api)
    source = "\n".join(page_modules().values())
    for key in config["urls"]:
        assert f"urls.{key}" in source, f"the page never reads urls.{key}"
    for key in config["limits"]:
        assert f"limits.{key}" in source, f"the page never reads limits.{key}"
    assert "config.toastLevels" in source


def _api_paths() -> set[str]:
    patterns, _, _ = ninja_api.urls
    return {f"/{pattern.pattern}" for pattern in patterns if str(pattern.pattern)} | {"/ws/"}  # not the page's "/"


def _hard_coded_paths(source: str) -> list[str]:
    """API paths, or the tail one API path adds to another (`${urls.notes}/versions`), that start a
    string or the text after a template's `${…}`."""
    paths = _api_paths()
    tails = {longer[len(shorter) :] for longer in paths for shorter in paths if longer.startswith(shorter + "/")}
    return [
        match.group(0)
        for path in sorted(paths | tails)
        for match in re.finditer(rf"[\"'`}}]{re.escape(path)}(?![\w-])", source)
    ]


def test_no_page_module_hard_codes_an_api_path_or_a_server_limit():
    chat_id_class = re.search(r"\[[^\]]+\]", CHAT_ID_RE.pattern).group(0)
    levels_list = re.compile(r"\[\s*" + r",\s*".join(f"[\"']{level}[\"']" for level in NOTIFICATION_LEVELS) + r"\s*\]")
    for name, source in page_modules().items():
        assert _hard_coded_paths(source) == [], name
        assert chat_id_class not in source, f"{name} copies the chat-id rule"
        assert not re.search(rf"\b({MAX_FRAME_BYTES}|{MAX_FRAME_BYTES // 1024} \* 1024)\b", source), name
        assert not levels_list.search(source), f"{name} copies the notification levels"


def test_the_hard_coded_path_check_sees_the_ways_a_path_gets_copied():
    assert _hard_coded_paths('fetch("/history?" + query)')
    assert _hard_coded_paths("const url = `${scheme}//${location.host}/ws/?${query}`;")
    assert _hard_coded_paths("api.get(`${urls.notes}/versions?${params}`)")
    assert _hard_coded_paths("const ROOT = '/memory/notes';")
    assert not _hard_coded_paths('const ROOT = "/memories/"; link.href = `?${params}#message-${id}`;')


def test_the_page_preloads_every_module_it_imports(api):
    """Its own modules and the vendored libraries they import (which import nothing themselves)."""
    modules = page_modules()
    imported, pending = set(), ["app.js"]
    while pending:
        name = pending.pop()
        for dependency in re.findall(r'from "\./([\w./-]+\.m?js)"', modules.get(name, "")):
            if dependency not in imported:
                imported.add(dependency)
                pending.append(dependency)
    assert any(name.startswith("vendor/") for name in imported)
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/static/buddy/([\w./-]+\.m?js)">', rendered_page(api)))
    assert preloaded == imported


@pytest.mark.parametrize(
    ("pattern", "source"),
    [
        (r"^[A-Za-z0-9_.:-]{1,64}$", r"^[A-Za-z0-9_.:-]{1,64}$"),
        (r"\A[a-z]+\Z", r"^[a-z]+$"),
        (r"(?P<name>[a-z]+)-\d", r"^(?:(?<name>[a-z]+)-\d)"),
        (r"^a|b", r"^(?:^a|b)"),
    ],
)
def test_a_python_pattern_becomes_the_javascript_source_that_accepts_the_same(pattern, source):
    assert js_regex_source(re.compile(pattern)) == source


@pytest.mark.parametrize(
    "pattern", [re.compile(r"(?i)abc"), re.compile("abc", re.IGNORECASE), re.compile(r"(?P<x>a)(?P=x)")]
)
def test_a_pattern_javascript_would_read_otherwise_is_refused(pattern):
    with pytest.raises(ValueError, match="no JavaScript equivalent"):
        js_regex_source(pattern)
