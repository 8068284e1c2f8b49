from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, transaction

from canvas.limits import MAX_ELEMENT_BYTES, MAX_ELEMENTS
from canvas.models import CanvasState
from canvas.selectors import canvas_state
from canvas.services import CanvasCommandError, canvas_apply, confirmation_answer, server_confirmation_show
from conversations.models import Session
from conversations.services import session_get_or_create
from tests.canvas.examples import ADD_EXAMPLES, TYPE_OF

pytestmark = pytest.mark.django_db


def apply(session, command, **params):
    return canvas_apply(session=session, command=command, params=params)


def ids(session) -> list[str]:
    return [element["id"] for element in canvas_state(session=session)["elements"]]


def stored(session) -> dict:
    state = CanvasState.objects.filter(session=session).first()
    if state is None:
        return {"row": None}
    return {"elements": state.elements, "mode": state.mode, "theme": state.theme, "version": state.version}


@pytest.mark.parametrize("command", sorted(ADD_EXAMPLES))
def test_every_add_command_stores_its_element_with_the_given_fields(session, command):
    change = apply(session, command, **ADD_EXAMPLES[command])
    state = canvas_state(session=session)
    assert state["elements"] == [{"type": TYPE_OF[command], **ADD_EXAMPLES[command]}]
    assert state["version"] == change.version == 1
    assert (change.command, change.params, change.version) == (command, ADD_EXAMPLES[command], 1)
    assert change.result  # a sentence for the model's tool_result


def test_the_canvas_row_is_created_lazily_and_version_grows_by_one_per_change(session):
    assert not CanvasState.objects.filter(session=session).exists()
    versions = [apply(session, command, **params).version for command, params in ADD_EXAMPLES.items()]
    versions.append(apply(session, "canvas_remove_element", id="poem").version)
    versions.append(apply(session, "canvas_set_theme", theme="dark").version)
    versions.append(apply(session, "canvas_show_notification", message="Hi").version)
    versions.append(apply(session, "canvas_update_card", id="plan", body="done").version)
    versions.append(apply(session, "canvas_set_mode", mode="clear").version)
    assert versions == list(range(1, len(versions) + 1))
    assert CanvasState.objects.get(session=session).version == len(versions)


def test_adding_an_existing_id_replaces_the_element_in_place(session):
    for element_id in ("a", "b", "c"):
        apply(session, "canvas_add_card", id=element_id, title=element_id.upper())
    change = apply(session, "canvas_show_text", id="b", content="now a text")
    elements = canvas_state(session=session)["elements"]
    assert [element["id"] for element in elements] == ["a", "b", "c"]
    assert elements[1] == {"type": "text", "id": "b", "content": "now a text"}
    assert "Replaced" in change.result


def test_update_merges_fields_keeps_position_and_broadcasts_the_whole_element(session):
    apply(session, "canvas_add_card", id="a", title="A")
    apply(session, **{"command": "canvas_show_chart", **ADD_EXAMPLES["canvas_show_chart"]})
    apply(session, "canvas_add_card", id="c", title="C", body="old")
    change = apply(session, "canvas_update_card", id="c", body="new")
    assert ids(session) == ["a", "sales", "c"]
    assert canvas_state(session=session)["elements"][2] == {"type": "card", "id": "c", "title": "C", "body": "new"}
    assert change.params == {"id": "c", "title": "C", "body": "new"}

    # Any element type can be updated, with its own fields, validated as a whole.
    change = apply(
        session, "canvas_update_card", id="sales", labels=["x", "y"], series=[{"name": "S", "values": [1, 2]}]
    )
    chart = canvas_state(session=session)["elements"][1]
    assert chart["labels"] == ["x", "y"] and chart["series"] == [{"name": "S", "values": [1, 2]}]
    assert chart["chart_type"] == "bar" and change.params["title"] == "Sales"

    # null removes an optional field.
    apply(session, "canvas_update_card", id="c", body=None)
    assert canvas_state(session=session)["elements"][2] == {"type": "card", "id": "c", "title": "C"}


def test_remove_and_clear(session):
    for element_id in ("a", "b", "c"):
        apply(session, "canvas_add_card", id=element_id, title=element_id)
    apply(session, "canvas_remove_element", id="b")
    assert ids(session) == ["a", "c"]
    apply(session, "canvas_set_theme", theme="dark")
    change = apply(session, "canvas_set_mode", mode="clear")
    state = canvas_state(session=session)
    assert state["elements"] == [] and state["mode"] == "clear" and state["theme"] == "dark"
    assert change.params == {"mode": "clear"}
    apply(session, "canvas_add_card", id="d", title="D")
    assert canvas_state(session=session)["mode"] == "content"
    apply(session, "canvas_set_mode", mode="content")
    assert ids(session) == ["d"]


def test_theme_is_stored_and_an_empty_theme_resets_it(session):
    apply(session, "canvas_set_theme", theme="dark")
    assert canvas_state(session=session)["theme"] == "dark"
    assert canvas_state(session=session)["elements"] == []
    apply(session, "canvas_set_theme", theme="")
    assert canvas_state(session=session)["theme"] == ""


def test_a_notification_moves_the_version_but_is_never_stored(session):
    apply(session, "canvas_add_card", id="a", title="A")
    before = stored(session)
    change = apply(session, "canvas_show_notification", message="Saved!", level="success")
    assert change.params == {"message": "Saved!", "level": "success"}
    after = stored(session)
    assert after["elements"] == before["elements"] and after["theme"] == before["theme"]
    assert after["version"] == before["version"] + 1  # every frame has its own version
    assert apply(session, "canvas_show_notification", message="plain").params["level"] == "info"


INVALID = [
    ("canvas_add_card", {"title": "no id"}, "`id`"),
    ("canvas_add_card", {"id": "", "title": "T"}, "not a valid element id"),
    ("canvas_add_card", {"id": "x" * 65, "title": "T"}, "not a valid element id"),
    ("canvas_add_card", {"id": "has space", "title": "T"}, "not a valid element id"),
    ("canvas_add_card", {"id": 7, "title": "T"}, "must be a string"),
    ("canvas_add_card", {"id": "a"}, "`title` is required"),
    ("canvas_add_card", {"id": "a", "title": "  "}, "must not be empty"),
    ("canvas_add_card", {"id": "a", "title": ["T"]}, "`title` must be a string"),
    ("canvas_add_card", {"id": "a", "title": "T", "body": 3}, "`body` must be a string"),
    ("canvas_add_card", {"id": "a", "title": "T", "colour": "red"}, "`colour` is not a field of a card"),
    ("canvas_show_text", {"id": "a"}, "`content` is required"),
    ("canvas_show_chart", {**ADD_EXAMPLES["canvas_show_chart"], "chart_type": "donut"}, "one of line, bar, pie"),
    ("canvas_show_chart", {**ADD_EXAMPLES["canvas_show_chart"], "labels": []}, "non-empty array"),
    (
        "canvas_show_chart",
        {**ADD_EXAMPLES["canvas_show_chart"], "labels": "Jan"},
        "`labels` must be an array, not 'Jan'",
    ),
    ("canvas_show_chart", {**ADD_EXAMPLES["canvas_show_chart"], "labels": [True, 1, 2]}, "`labels[0]`"),
    ("canvas_show_chart", {**ADD_EXAMPLES["canvas_show_chart"], "series": []}, "non-empty array"),
    ("canvas_show_chart", {**ADD_EXAMPLES["canvas_show_chart"], "series": [[1, 2, 3]]}, "must be an object"),
    (
        "canvas_show_chart",
        {**ADD_EXAMPLES["canvas_show_chart"], "series": [{"name": "S", "values": [1, 2]}]},
        "has 2 values but there are 3 labels",
    ),
    (
        "canvas_show_chart",
        {**ADD_EXAMPLES["canvas_show_chart"], "series": [{"name": "S", "values": [1, "2", 3]}]},
        "`series[0].values[1]` must be a number",
    ),
    (
        "canvas_show_chart",
        {**ADD_EXAMPLES["canvas_show_chart"], "series": [{"name": "S", "values": [1, 2, 3], "color": "red"}]},
        "`series[0].color` is not a field of a series; its fields are: name, values",
    ),
    (
        "canvas_show_chart",
        {**ADD_EXAMPLES["canvas_show_chart"], "series": [{"values": [1, 2, 3]}]},
        "`series[0].name` is required",
    ),
    ("canvas_show_table", {**ADD_EXAMPLES["canvas_show_table"], "columns": []}, "`columns` must be a non-empty array"),
    ("canvas_show_table", {**ADD_EXAMPLES["canvas_show_table"], "rows": [["Ann", 1]]}, "has 2 cells but there are 3"),
    ("canvas_show_table", {**ADD_EXAMPLES["canvas_show_table"], "rows": ["Ann"]}, "`rows[0]` must be an array"),
    ("canvas_show_table", {**ADD_EXAMPLES["canvas_show_table"], "rows": [["A", {}, 1]]}, "`rows[0][1]`"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "media_type": "pdf"}, "image, audio, video"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "url": "javascript:alert(1)"}, "path on this site"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "url": "//evil.test/x.png"}, "path on this site"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "url": "/\\evil.example/x.mp4"}, "path on this site"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "url": "/\t/evil.example/x.mp4"}, "path on this site"),
    ("canvas_play_media", {**ADD_EXAMPLES["canvas_play_media"], "url": "\\\\evil.example/x.mp4"}, "path on this site"),
    (
        "canvas_play_media",
        {**ADD_EXAMPLES["canvas_play_media"], "url": "https://evil.example/x.png"},
        "path on this site",
    ),
    (
        "canvas_play_media",
        {**ADD_EXAMPLES["canvas_play_media"], "url": "http://media.example/x.png"},
        "path on this site",
    ),
    (
        "canvas_play_media",
        {**ADD_EXAMPLES["canvas_play_media"], "url": "https://media.example@evil.example/x.png"},
        "path on this site",
    ),
    (
        "canvas_play_media",
        {**ADD_EXAMPLES["canvas_play_media"], "url": "https://media.example:8443/x.png"},
        "path on this site",
    ),
    (
        "canvas_play_media",
        {**ADD_EXAMPLES["canvas_play_media"], "url": "https:/\\evil.example/x.png"},
        "path on this site",
    ),
    ("canvas_show_confirmation", {"id": "go", "title": "T"}, "`message` is required"),
    ("canvas_show_confirmation", {"id": "go", "title": "T", "message": "M", "answered": "confirmed"}, "`answered`"),
    ("canvas_show_confirmation", {"id": "go", "title": "T", "message": "M", "confirm_label": "x" * 41}, "at most 40"),
    ("canvas_update_card", {"id": "missing", "title": "T"}, "no element `missing`"),
    ("canvas_update_card", {"id": "keep"}, "at least one field"),
    ("canvas_update_card", {"id": "keep", "content": "x"}, "`content` is not a field of a card"),
    ("canvas_update_card", {"id": "keep", "title": None}, "cannot be removed"),
    ("canvas_update_card", {"id": "keep", "type": "text"}, "`type` is not a field"),
    ("canvas_update_card", {"id": "keep", "title": 5}, "`title` must be a string"),
    ("canvas_remove_element", {"id": "missing"}, "no element `missing` on the canvas; its ids are: keep"),
    ("canvas_remove_element", {}, "`id` is required"),
    ("canvas_set_mode", {"mode": "fullscreen"}, "one of content, clear"),
    ("canvas_set_mode", {}, "`mode` is required"),
    ("canvas_set_theme", {}, "`theme` is required"),
    ("canvas_set_theme", {"theme": 1}, "must be a string"),
    ("canvas_set_theme", {"theme": "t" * 65}, "at most 64"),
    ("canvas_show_notification", {}, "`message` is required"),
    ("canvas_show_notification", {"message": "hi", "level": "fatal"}, "one of info, success, warning, error"),
    (
        "canvas_show_notification",
        {"message": "hi", "sound": True},
        "`sound` is not a field of canvas_show_notification; its fields are: message, level",
    ),
    ("canvas_draw", {"id": "a"}, "unknown canvas command `canvas_draw`"),
]


def test_media_from_an_allowed_host_or_a_same_site_path_is_accepted(session, settings):
    settings.BUDDY_MEDIA_HOSTS = ["media.example", "cdn.example:8443"]
    for url in [
        "/media/x.png",
        "https://media.example/x.png",
        "https://media.example:443/x",
        "https://cdn.example:8443/y",
    ]:
        apply(session, "canvas_play_media", id="m", url=url, media_type="image")
    assert canvas_state(session=session)["elements"][0]["url"] == "https://cdn.example:8443/y"


@pytest.mark.parametrize(("command", "params", "reason"), INVALID, ids=[f"{c}-{r[:30]}" for c, _, r in INVALID])
def test_invalid_input_changes_nothing_and_says_why(
    session, django_capture_on_commit_callbacks, command, params, reason
):
    apply(session, "canvas_add_card", id="keep", title="Keep", body="me")
    apply(session, "canvas_set_theme", theme="dark")
    before = stored(session)
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(CanvasCommandError) as refused:
        canvas_apply(session=session, command=command, params=params)
    assert reason in str(refused.value)
    assert stored(session) == before
    assert callbacks == []  # nothing broadcast


def test_params_must_be_an_object(session):
    with pytest.raises(CanvasCommandError, match="must be an object, not an array"):
        canvas_apply(session=session, command="canvas_add_card", params=["id", "a"])
    assert stored(session) == {"row": None}  # a refused first command does not even create the row


def test_at_most_50_elements_but_replacing_at_the_limit_works(session):
    for index in range(MAX_ELEMENTS):
        apply(session, "canvas_add_card", id=f"e{index}", title=str(index))
    before = stored(session)
    with pytest.raises(CanvasCommandError, match="already holds 50 elements") as refused:
        apply(session, "canvas_add_card", id="one-more", title="too many")
    assert refused.value.code == "too_many_elements"
    assert stored(session) == before
    apply(session, "canvas_add_card", id="e7", title="replaced")
    assert ids(session)[7] == "e7" and len(ids(session)) == MAX_ELEMENTS
    apply(session, "canvas_remove_element", id="e0")
    apply(session, "canvas_add_card", id="one-more", title="fits now")
    assert ids(session)[-1] == "one-more"


def _card_of_size(size: int) -> dict:
    """Params of a card whose stored element is exactly `size` bytes of compact UTF-8 JSON."""
    element = {"type": "card", "id": "big", "title": "Big", "body": ""}
    overhead = len(json.dumps(element, ensure_ascii=False, separators=(",", ":")).encode())
    # "é" is two bytes in UTF-8: the limit is on bytes, not characters.
    body = "é" * ((size - overhead) // 2) + "x" * ((size - overhead) % 2)
    return {"id": "big", "title": "Big", "body": body}


def test_an_element_is_at_most_16_kib_of_json(session):
    apply(session, "canvas_add_card", **_card_of_size(MAX_ELEMENT_BYTES))
    assert ids(session) == ["big"]
    before = stored(session)
    with pytest.raises(CanvasCommandError, match="16 KiB") as refused:
        apply(session, "canvas_add_card", **_card_of_size(MAX_ELEMENT_BYTES + 1))
    assert refused.value.code == "too_large"
    # An update that would make it too large is refused just the same.
    with pytest.raises(CanvasCommandError, match="16 KiB"):
        apply(session, "canvas_update_card", id="big", title="Bigger")
    assert stored(session) == before


def test_a_refused_command_leaves_the_callers_transaction_usable(session, django_capture_on_commit_callbacks):
    """The turn code archives the tool_result in the same transaction, after a refusal too."""
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        apply(session, "canvas_add_card", id="a", title="A")
        with pytest.raises(CanvasCommandError):
            apply(session, "canvas_remove_element", id="nope")
        apply(session, "canvas_add_card", id="b", title="B")
    assert ids(session) == ["a", "b"]
    assert canvas_state(session=session)["version"] == 2
    assert callbacks == []  # the canvas app pushes nothing: its caller does (tests/agent/test_canvas.py)


def test_a_rolled_back_change_is_not_stored(session):
    apply(session, "canvas_add_card", id="a", title="A")
    before = stored(session)
    with pytest.raises(RuntimeError), transaction.atomic():
        apply(session, "canvas_add_card", id="b", title="B")
        raise RuntimeError("the tool_result could not be archived")
    assert stored(session) == before


def test_canvases_are_per_session(session, other_user, helper_agent):
    other = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    other_agent = session_get_or_create(user=session.user, agent_slug="helper", chat_id="main")
    apply(session, "canvas_add_card", id="a", title="mine")
    apply(other, "canvas_add_card", id="b", title="theirs")
    apply(other_agent, "canvas_add_card", id="c", title="helper's")
    assert ids(session) == ["a"] and ids(other) == ["b"] and ids(other_agent) == ["c"]


# --- confirmations ----------------------------------------------------------------------------------


def test_a_confirmation_answer_is_stored_once(session):
    apply(session, "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"])
    change = confirmation_answer(session=session, element_id="go", confirmed=False)
    element = canvas_state(session=session)["elements"][0]
    assert element["answered"] == "declined"
    assert (change.command, change.params, change.version) == (
        "canvas_update_card",
        {**ADD_EXAMPLES["canvas_show_confirmation"], "answered": "declined"},
        2,
    )
    before = stored(session)
    with pytest.raises(CanvasCommandError, match="already answered") as refused:
        confirmation_answer(session=session, element_id="go", confirmed=True)
    assert refused.value.code == "already_answered"
    assert stored(session) == before
    # An update by the model keeps the answer; adding it again asks again.
    apply(session, "canvas_update_card", id="go", message="Deploy version 3?")
    assert canvas_state(session=session)["elements"][0]["answered"] == "declined"
    apply(session, "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"])
    assert "answered" not in canvas_state(session=session)["elements"][0]
    confirmation_answer(session=session, element_id="go", confirmed=True)
    assert canvas_state(session=session)["elements"][0]["answered"] == "confirmed"


QUESTION = {"id": "memory-1a2b3c", "title": "Remember in all chats?", "message": "likes tea", "confirm_label": "Yes"}


@pytest.mark.parametrize(
    ("command", "params"),
    [
        ("canvas_show_confirmation", {"title": "Remember in all chats?", "message": "Show the weather?"}),
        ("canvas_add_card", {"title": "Show the weather?"}),
        ("canvas_update_card", {"message": "Show the weather?"}),
        ("canvas_remove_element", {}),
    ],
)
def test_the_servers_questions_are_out_of_every_canvas_tools_reach(session, command, params):
    server_confirmation_show(session=session, params=QUESTION)
    before = stored(session)
    for element_id in (QUESTION["id"], "MEMORY-other"):
        with pytest.raises(CanvasCommandError, match="only the user answers them") as refused:
            apply(session, command, id=element_id, **params)
        assert refused.value.code == "reserved_id"
    assert stored(session) == before


def test_a_clear_keeps_the_servers_pending_question_and_says_so_in_its_frame(session):
    apply(session, "canvas_add_card", id="plan", title="Plan")
    server_confirmation_show(session=session, params=QUESTION)
    change = apply(session, "canvas_set_mode", mode="clear")
    assert change.params == {"mode": "clear", "keep": [QUESTION["id"]]}
    assert ids(session) == [QUESTION["id"]]
    answered = confirmation_answer(session=session, element_id=QUESTION["id"], confirmed=True, outcome="Done.")
    assert answered.params == {**QUESTION, "answered": "confirmed", "outcome": "Done."}
    assert apply(session, "canvas_set_mode", mode="clear").params == {"mode": "clear"}
    assert ids(session) == []


def test_a_servers_question_may_show_a_whole_note_beyond_the_models_element_size(session):
    message = "x" * (MAX_ELEMENT_BYTES + 100)
    with pytest.raises(CanvasCommandError, match="16 KiB"):
        apply(session, "canvas_show_confirmation", id="big", title="T", message=message)
    server_confirmation_show(session=session, params={**QUESTION, "message": message})
    assert canvas_state(session=session)["elements"][0]["message"] == message
    with pytest.raises(CanvasCommandError, match="memory-"):
        server_confirmation_show(session=session, params={**QUESTION, "id": "plain"})


def test_confirmation_answer_errors(session):
    with pytest.raises(CanvasCommandError) as refused:
        confirmation_answer(session=session, element_id="go", confirmed=True)
    assert refused.value.code == "unknown_element"
    assert stored(session) == {"row": None}
    apply(session, "canvas_add_card", id="card", title="T")
    before = stored(session)
    with pytest.raises(CanvasCommandError) as refused:
        confirmation_answer(session=session, element_id="card", confirmed=True)
    assert refused.value.code == "not_a_confirmation"
    with pytest.raises(CanvasCommandError) as refused:
        confirmation_answer(session=session, element_id="nope", confirmed=True)
    assert refused.value.code == "unknown_element"
    assert stored(session) == before


# --- no lost update ------------------------------------------------------------------------------------


def _run_concurrently(workers: int, work) -> list[BaseException]:
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            work(index)
        except BaseException as error:  # noqa: BLE001  (reported by the test)
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_lose_an_update(user, agent):
    """Every thread adds its own elements at once, starting on a canvas that has no row yet."""
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="race")
    workers, per_worker = 4, 10

    def work(index: int) -> None:
        own = Session.objects.get(pk=session.pk)
        for number in range(per_worker):
            canvas_apply(session=own, command="canvas_add_card", params={"id": f"w{index}-{number}", "title": "x"})

    assert _run_concurrently(workers, work) == []
    state = canvas_state(session=session)
    expected = {f"w{index}-{number}" for index in range(workers) for number in range(per_worker)}
    assert {element["id"] for element in state["elements"]} == expected
    assert len(state["elements"]) == workers * per_worker
    assert state["version"] == workers * per_worker
    # Each worker's own elements stay in the order it added them.
    order = [element["id"] for element in state["elements"]]
    for index in range(workers):
        mine = [element_id for element_id in order if element_id.startswith(f"w{index}-")]
        assert mine == [f"w{index}-{number}" for number in range(per_worker)]


@pytest.mark.django_db(transaction=True)
def test_concurrent_replacements_and_notifications_each_take_a_version(user, agent):
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="race")
    workers, rounds = 3, 6

    def work(index: int) -> None:
        own = Session.objects.get(pk=session.pk)
        for number in range(rounds):
            canvas_apply(session=own, command="canvas_add_card", params={"id": f"c{index}", "title": str(number)})
            canvas_apply(session=own, command="canvas_show_notification", params={"message": f"{index}/{number}"})

    assert _run_concurrently(workers, work) == []
    state = canvas_state(session=session)
    assert sorted(element["id"] for element in state["elements"]) == ["c0", "c1", "c2"]
    assert {element["title"] for element in state["elements"]} == {str(rounds - 1)}
    assert state["version"] == workers * rounds * 2


def test_canvas_reduce_replays_to_the_stored_canvas_and_refuses_like_canvas_apply(session):
    """The pure reducer (audits replay archived tool calls with it) agrees with canvas_apply, refusals
    included, without touching the database."""
    from canvas.services import canvas_reduce

    commands = [
        *((command, params) for command, params in ADD_EXAMPLES.items()),
        ("canvas_update_card", {"id": "plan", "body": None}),
        ("canvas_remove_element", {"id": "ghost"}),  # refused: unknown id
        ("canvas_remove_element", {"id": "poem"}),
        ("canvas_add_card", {"id": "plan", "title": ""}),  # refused: empty title
        ("canvas_set_theme", {"theme": "dark"}),
        ("canvas_set_mode", {"mode": "clear"}),
        ("canvas_add_card", {"id": "again", "title": "After the clear"}),
    ]
    replayed = CanvasState(session_id=session.pk)
    changes = 0
    for command, params in commands:
        try:
            canvas_apply(session=session, command=command, params=params)
            applied = True
            changes += 1
        except CanvasCommandError:
            applied = False
        before = (list(replayed.elements), replayed.mode, replayed.theme)
        try:
            canvas_reduce(replayed, command=command, params=params)
            assert applied, f"{command} was refused by canvas_apply but not by canvas_reduce"
        except CanvasCommandError:
            assert not applied, f"{command} was refused by canvas_reduce only"
            assert (replayed.elements, replayed.mode, replayed.theme) == before, "a refusal changed the state"
    state = stored(session)
    assert (replayed.elements, replayed.mode, replayed.theme) == (state["elements"], state["mode"], state["theme"])
    assert changes == len(commands) - 2 and state["version"] == changes and replayed.version == 0
