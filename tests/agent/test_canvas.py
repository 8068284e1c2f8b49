"""agent/canvas.py: the canvas app returns what changed; the agent pushes each change's frame to the
chat's sockets once its transaction commits, and never a change that was refused or rolled back."""

from __future__ import annotations

import pytest
from django.db import transaction

from agent import canvas as agent_canvas
from agent.canvas import canvas_command_run, canvas_confirmation_answer, canvas_replay_frames
from canvas.elements import CanvasCommandError
from canvas.selectors import canvas_state
from realtime.frames import SERVER_FRAMES, CanvasCommandFrame
from tests.canvas.examples import ADD_EXAMPLES

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: frames go out on commit


@pytest.fixture
def pushed(monkeypatch) -> list[dict]:
    """What agent.canvas hands to the sockets, as the frames a client gets, once each is sent."""
    sent: list[dict] = []

    def send(group: str, message: dict) -> None:
        sent.append(message["frame"])

    monkeypatch.setattr("realtime.push._group_send", send)
    return sent


def run(session, command, **params):
    return canvas_command_run(session=session, command=command, params=params)


def test_each_change_is_pushed_once_its_transaction_commits(session, pushed):
    with transaction.atomic():
        run(session, "canvas_add_card", id="a", title="A")
        with pytest.raises(CanvasCommandError):
            run(session, "canvas_remove_element", id="nope")  # refused: nothing to show
        run(session, "canvas_add_card", id="b", title="B")
        assert pushed == []  # not before the commit
    assert pushed == [
        {"type": "canvas_command", "command": "canvas_add_card", "params": {"id": "a", "title": "A"}, "version": 1},
        {"type": "canvas_command", "command": "canvas_add_card", "params": {"id": "b", "title": "B"}, "version": 2},
    ]
    for frame in pushed:
        SERVER_FRAMES.validate_python(frame)


def test_a_rolled_back_change_is_never_pushed(session, pushed):
    run(session, "canvas_add_card", id="a", title="A")
    pushed.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        run(session, "canvas_add_card", id="b", title="B")
        raise RuntimeError("the tool_result could not be archived")
    with transaction.atomic():
        # A savepoint rolled back inside a transaction that commits (a refused memory command that had
        # already asked on the canvas, agent/tools.py): its change is dropped with it.
        with pytest.raises(RuntimeError), transaction.atomic():
            run(session, "canvas_add_card", id="c", title="C")
            raise RuntimeError("the note command was refused after all")
        run(session, "canvas_add_card", id="d", title="D")
    assert [frame["params"]["id"] for frame in pushed] == ["d"]
    assert [element["id"] for element in canvas_state(session=session)["elements"]] == ["a", "d"]


def test_a_confirmation_answer_is_pushed_as_the_whole_element(session, pushed):
    run(session, "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"])
    pushed.clear()
    canvas_confirmation_answer(session=session, element_id="go", confirmed=True)
    assert pushed == [
        {
            "type": "canvas_command",
            "command": "canvas_update_card",
            "params": {**ADD_EXAMPLES["canvas_show_confirmation"], "answered": "confirmed"},
            "version": 2,
        }
    ]


def test_the_replay_is_built_as_frames_from_what_the_canvas_returns(session):
    run(session, "canvas_add_card", id="a", title="A")
    run(session, "canvas_set_theme", theme="dark")
    frames = canvas_replay_frames(session=session)
    assert all(isinstance(frame, CanvasCommandFrame) and frame.version == 2 for frame in frames)
    assert [(frame.command, frame.params) for frame in frames] == [
        ("canvas_set_mode", {"mode": "clear"}),
        ("canvas_add_card", {"id": "a", "title": "A"}),
        ("canvas_set_theme", {"theme": "dark"}),
    ]
    assert [frame.dump() for frame in canvas_replay_frames(session=None)] == [
        {"type": "canvas_command", "command": "canvas_set_mode", "params": {"mode": "clear"}, "version": 0}
    ]


def test_the_module_is_what_the_turn_and_the_socket_push_through(monkeypatch, session):
    """agent/tools.py and agent/chat.py push canvas changes only through canvas_change_push."""
    calls: list[str] = []
    monkeypatch.setattr(agent_canvas, "push_frame_on_commit", lambda session, frame: calls.append(frame.command))
    from agent.tools import tool_round_run

    tool_round_run(
        session=session,
        tool_uses=[{"type": "tool_use", "id": "t1", "name": "canvas_add_card", "input": {"id": "x", "title": "X"}}],
    )
    assert calls == ["canvas_add_card"]
