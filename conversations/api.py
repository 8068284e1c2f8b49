from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from conversations import selectors
from conversations.schemas import AgentOut, ChatOut

router = Router(tags=["conversations"])


@router.get("/agents", response=list[AgentOut], summary="The agents a user can talk to")
def agents(request: HttpRequest):
    return [AgentOut(id=a.slug, name=a.name, avatar=a.avatar) for a in selectors.agent_list()]


@router.get("/chats", response=list[ChatOut], summary="The user's conversations")
def chats(request: HttpRequest):
    return [
        ChatOut(agent=s.agent.slug, chat_id=s.chat_id, last_message_at=s.last_message_at, messages=s.message_count)
        for s in selectors.session_list(user=request.user)
    ]
