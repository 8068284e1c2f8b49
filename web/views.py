from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from conversations.refs import DEFAULT_AGENT, DEFAULT_CHAT_ID
from conversations.selectors import agent_get


@login_required
def index(request: HttpRequest) -> HttpResponse:
    user = request.user
    default_agent = agent_get(slug=DEFAULT_AGENT)
    # Everything the page script needs, handed over with json_script (never interpolated into JS).
    config = {
        "user": {"username": user.get_username(), "name": user.get_full_name() or user.get_username()},
        "defaultAgent": DEFAULT_AGENT,
        "defaultAgentName": default_agent.name if default_agent else "Buddy",
        "defaultAgentAvatar": default_agent.avatar if default_agent else "🤖",
        "defaultChatId": DEFAULT_CHAT_ID,
        "offline": settings.BUDDY_LLM == "offline",
        "loginUrl": settings.LOGIN_URL,
        "urls": {
            "agents": "/agents",
            "chats": "/chats",
            "history": "/history",
            "prompt": "/prompt",
            "notes": "/memory/notes",
        },
    }
    context = {
        "offline": settings.BUDDY_LLM == "offline",
        "config": config,
        "user_display_name": config["user"]["name"],
        "default_agent": default_agent,
        "logout_url": reverse("logout"),
    }
    return render(request, "index.html", context)
