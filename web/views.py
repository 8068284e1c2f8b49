from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render, resolve_url
from django.urls import reverse

from canvas.limits import NOTIFICATION_LEVELS
from conversations.models import TITLE_MAX_CHARS, Agent
from conversations.refs import CHAT_ID_RE, DEFAULT_AGENT, DEFAULT_CHAT_ID
from conversations.selectors import agent_get
from memory.notes.paths import NOTE_MAX_BYTES
from realtime.limits import MAX_FRAME_BYTES
from web.models import Theme
from web.routing import websocket_urlpatterns
from web.services import preferences_get

# Python-only regex syntax, and what a JavaScript RegExp (no flags) reads the same way.
_PYTHON_ONLY = ((r"\A", "^"), (r"\Z", "$"), ("(?P<", "(?<"))
# Constructs JavaScript has no equivalent for without flags: inline flags, named back-references, comments.
_NOT_IN_JAVASCRIPT = re.compile(r"\(\?[aiLmsux-]|\(\?P=|\(\?#")


def js_regex_source(pattern: re.Pattern[str]) -> str:
    """The source of a JavaScript RegExp that accepts what `pattern.match` accepts.

    Where the two read a pattern differently the page is the stricter: JavaScript's `$` matches only
    at the end (Python's also before a final newline), its `\\d` and `\\w` only ASCII. Raises
    ValueError for flags and syntax JavaScript lacks."""
    source = pattern.pattern
    if pattern.flags & ~re.UNICODE or _NOT_IN_JAVASCRIPT.search(source):
        raise ValueError(f"{source!r} has no JavaScript equivalent")
    for python, javascript in _PYTHON_ONLY:
        source = source.replace(python, javascript)
    # `match` anchors at the start; a RegExp's `test` searches.
    return source if source.startswith("^") and "|" not in source else f"^(?:{source})"


def socket_path() -> str:
    """The chat socket's path, from the WebSocket routes (web/routing.py) as `reverse` builds it."""
    return reverse("socket", urlconf=tuple(websocket_urlpatterns))


def page_config(*, user, default_agent: Agent | None, theme: str = Theme.SYSTEM) -> dict[str, Any]:
    """Everything the page script needs, handed over with json_script (never interpolated into JS):
    the API paths it calls, the server's limits and enumerations it follows, the person's preferences."""
    return {
        "user": {"username": user.get_username(), "name": user.get_full_name() or user.get_username()},
        "defaultAgent": DEFAULT_AGENT,
        "defaultAgentName": default_agent.name if default_agent else "Buddy",
        "defaultAgentAvatar": default_agent.avatar if default_agent else "🤖",
        "defaultChatId": DEFAULT_CHAT_ID,
        "offline": settings.BUDDY_LLM == "offline",
        "loginUrl": resolve_url(settings.LOGIN_URL),
        "urls": {
            "agents": reverse("api:agents"),
            "chats": reverse("api:chats"),
            "chatExport": reverse("api:chat_export"),
            "history": reverse("api:history"),
            "prompt": reverse("api:prompt"),
            "notes": reverse("api:notes_list"),
            "noteVersions": reverse("api:notes_versions"),
            "noteRestore": reverse("api:notes_restore"),
            "preferences": reverse("api:preferences"),
            "search": reverse("api:search_all"),
            "socket": socket_path(),
        },
        "limits": {
            "frameBytes": MAX_FRAME_BYTES,
            "chatIdPattern": js_regex_source(CHAT_ID_RE),
            "titleChars": TITLE_MAX_CHARS,
            "noteBytes": NOTE_MAX_BYTES,
        },
        "toastLevels": list(NOTIFICATION_LEVELS),
        # Hosts images in Markdown may load from (the page's Content-Security-Policy allows the same).
        "mediaHosts": list(settings.BUDDY_MEDIA_HOSTS),
        "preferences": {"theme": theme, "themes": list(Theme.values)},
    }


@login_required
def index(request: HttpRequest) -> HttpResponse:
    default_agent = agent_get(slug=DEFAULT_AGENT)
    theme = preferences_get(user=request.user).theme
    config = page_config(user=request.user, default_agent=default_agent, theme=theme)
    context = {
        # On <html> as the page is served, so the first paint is already in the chosen theme.
        "color_scheme": "" if theme == Theme.SYSTEM else theme,
        "theme": theme,
        "theme_choices": Theme.choices,
        "offline": config["offline"],
        "config": config,
        "user_display_name": config["user"]["name"],
        "default_agent": default_agent,
        "logout_url": reverse("logout"),
    }
    return render(request, "index.html", context)
