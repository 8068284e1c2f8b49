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


def calls(*tool_calls: tuple[str, dict]) -> str:
    return "CANVAS: " + json.dumps([{"name": name, "input": tool_input} for name, tool_input in tool_calls])


@database_sync_to_async
def notes() -> dict[str, str]:
    return dict(Note.objects.values_list("path", "content"))


async def test_a_yes_to_text_that_changed_underneath_saves_nothing_and_says_so(user, agent):
    """Rename a chat note into the profile, overwrite the chat note, then yes: the element, the answer's
    turn and the model's reply all say nothing was saved because the notes changed."""
    note = {"command": "create", "path": "/memories/tea.md", "file_text": "likes green tea"}
    rename = {"command": "rename", "old_path": "/memories/tea.md", "new_path": "/memories/profile/tea.md"}
    overwrite = {**note, "file_text": "likes black coffee"}
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        for prompt in (calls(("memory", note)), calls(("memory", rename)), calls(("memory", overwrite))):
            await tab.send_json_to({"type": "prompt", "text": prompt})
            frames = await frames_until(tab, "assistant_message")
            if prompt == calls(("memory", rename)):
                [shown] = [f for f in frames if f.get("command") == "canvas_show_confirmation"]
        assert shown["params"]["message"].endswith("\n\nlikes green tea")
        await tab.send_json_to({"type": "confirmation_response", "id": shown["params"]["id"], "confirmed": True})
        frames = await frames_until(tab, "assistant_message")
    [marked] = [f for f in frames if f.get("command") == "canvas_update_card"]
    [started] = [f for f in frames if f["type"] == "user_message"]
    reply = frames[-1]["text"]
    why = "Not done: the notes changed after this question was asked (/memories/tea.md no longer holds"
    assert marked["params"]["answered"] == "confirmed" and marked["params"]["outcome"].startswith(why)
    assert started["kind"] == "confirmation" and why in started["text"] and why in reply
    assert await notes() == {"/memories/tea.md": "likes black coffee"}
    assert await proposal_statuses() == ["failed"]
