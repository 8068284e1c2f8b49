from __future__ import annotations

import pytest

from agent.canvas import canvas_replay_frames
from canvas.elements import CanvasChange
from canvas.selectors import canvas_replay, canvas_snapshot_text, canvas_state
from canvas.services import canvas_apply, confirmation_answer
from conversations.models import Session
from tests.canvas.examples import ADD_EXAMPLES, CanvasMirror

pytestmark = pytest.mark.django_db


def apply(session, command, **params):
    return canvas_apply(session=session, command=command, params=params)


def replay_frames(session) -> list[dict]:
    """The replay as the frames a client gets (agent.canvas builds them from canvas_replay)."""
    return [frame.dump() for frame in canvas_replay_frames(session=session)]


def test_an_unknown_chat_replays_as_an_empty_canvas_and_is_not_created(user):
    assert canvas_replay(session=None) == [CanvasChange(command="canvas_set_mode", params={"mode": "clear"}, version=0)]
    assert canvas_state(session=None)["elements"] == []
    assert canvas_snapshot_text(session=None) == ""
    assert not Session.objects.exists()


def test_replay_is_clear_then_every_element_in_order_then_the_theme(session):
    for command, params in ADD_EXAMPLES.items():
        apply(session, command, **params)
    apply(session, "canvas_set_theme", theme="dark")
    confirmation_answer(session=session, element_id="go", confirmed=True)
    frames = replay_frames(session)
    version = canvas_state(session=session)["version"]
    assert all(frame["version"] == version for frame in frames)
    assert frames[0]["command"] == "canvas_set_mode" and frames[0]["params"] == {"mode": "clear"}
    assert [(frame["command"], frame["params"]) for frame in frames[1:-1]] == [
        (command, {**params, "answered": "confirmed"} if command == "canvas_show_confirmation" else params)
        for command, params in ADD_EXAMPLES.items()
    ]
    assert frames[-1]["command"] == "canvas_set_theme" and frames[-1]["params"] == {"theme": "dark"}

    mirror = CanvasMirror()
    for frame in frames:
        mirror.apply(frame)
    state = canvas_state(session=session)
    assert mirror.state() == {"elements": state["elements"], "theme": "dark", "version": state["version"]}


def test_replay_without_a_theme_has_no_theme_frame(session):
    apply(session, "canvas_add_card", id="a", title="A")
    frames = replay_frames(session)
    assert [frame["command"] for frame in frames] == ["canvas_set_mode", "canvas_add_card"]


def test_snapshot_has_one_line_per_element_with_type_id_title_and_150_characters(session):
    assert canvas_snapshot_text(session=session) == ""
    apply(session, "canvas_add_card", id="plan", title="Trip plan", body="Book\nflights " + "x" * 300)
    apply(session, **{"command": "canvas_show_chart", **ADD_EXAMPLES["canvas_show_chart"]})
    apply(session, **{"command": "canvas_show_table", **ADD_EXAMPLES["canvas_show_table"]})
    apply(session, "canvas_play_media", id="song", url="/media/song.mp3", media_type="audio")
    apply(session, **{"command": "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"]})
    apply(session, "canvas_show_text", id="note", content="short")
    apply(session, "canvas_show_notification", message="never in the snapshot")
    lines = canvas_snapshot_text(session=session).splitlines()
    assert lines[0] == "What's currently on the canvas:"
    assert len(lines) == 7
    plan = lines[1]
    assert plan.startswith('- card `plan` titled "Trip plan": Book flights xxx')
    assert len(plan.split(": ", 1)[1]) == 150
    assert lines[2].startswith('- chart `sales` titled "Sales": bar chart of Jan, Feb, 2026')
    assert "EU: 1, 2.5, –" in lines[2]
    assert lines[3] == '- table `people` titled "People": 2 rows × Name, Age, Admin'
    assert lines[4] == "- media `song`: audio /media/song.mp3"
    assert lines[5].startswith('- confirmation `go` titled "Deploy?": (awaiting the user\'s answer) Deploy')
    assert lines[6] == "- text `note`: short"
    assert "never in the snapshot" not in canvas_snapshot_text(session=session)

    confirmation_answer(session=session, element_id="go", confirmed=False)
    assert "(answered: declined)" in canvas_snapshot_text(session=session).splitlines()[5]
    apply(session, "canvas_set_mode", mode="clear")
    assert canvas_snapshot_text(session=session) == ""
