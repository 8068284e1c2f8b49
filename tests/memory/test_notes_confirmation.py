"""A profile note proposed by the model is applied only when the user answers its canvas confirmation
yes over the WebSocket (the offline demo model makes the tool call)."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from memory.models import Note, NoteProposal
from tests.web.test_consumer import login_cookie, opened
from tests.web.test_consumer_turns import frames_until

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSE = "CANVAS: " + json.dumps(
    [{"name": "memory", "input": {"command": "create", "path": "/memories/profile/tea.md", "file_text": "Likes tea"}}]
)


@database_sync_to_async
def profile_notes() -> list[str]:
    return list(Note.objects.filter(scope="profile").values_list("content", flat=True))


@database_sync_to_async
def proposal_statuses() -> list[str]:
    return list(NoteProposal.objects.order_by("id").values_list("status", flat=True))


@pytest.mark.parametrize(("confirmed", "kept"), [(True, ["Likes tea"]), (False, [])])
async def test_the_answer_decides_the_profile_note(user, agent, confirmed, kept):
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": PROPOSE})
        frames = await frames_until(tab, "assistant_message")
        [shown] = [f for f in frames if f["type"] == "canvas_command" and f["command"] == "canvas_show_confirmation"]
        assert shown["params"]["title"] == "Remember in all chats?"
        assert await profile_notes() == []
        await tab.send_json_to({"type": "confirmation_response", "id": shown["params"]["id"], "confirmed": confirmed})
        await frames_until(tab, "assistant_message")
    assert await profile_notes() == kept
    assert await proposal_statuses() == ["applied" if confirmed else "declined"]
