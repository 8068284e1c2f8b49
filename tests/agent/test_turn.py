"""The agent turn through the real SDK and a fake Messages API that rejects what the real API rejects."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from agent.llm import usage_dict
from agent.turn import turn_cancel, turn_run
from canvas.models import CanvasState
from conversations.models import Message, ModelCall, Session
from conversations.services import session_get_or_create
from conversations.tokens import api_token_create
from devtools.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)


def post(client, text, headers=None, **fields):
    return client.post("/prompt", {"text": text, **fields}, content_type="application/json", headers=headers or {})


def all_request_text(request) -> str:
    return json.dumps(request["body"], ensure_ascii=False)


def context_block(request) -> str:
    return request["body"]["messages"][-1]["content"][-1]["text"]


def test_a_prompt_is_answered_and_every_step_archived(api, model, user):
    response = post(api, "hello there")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["reply"] == "Echo: hello there"
    assert (body["agent"], body["chat_id"]) == ("buddy", "main")
    messages = list(Message.objects.order_by("id"))
    assert [m.role for m in messages] == ["user", "assistant"]
    assert body["message_id"] == messages[1].id
    call = ModelCall.objects.get()
    assert call.kind == "chat" and call.input_tokens > 0 and call.output_tokens > 0


def test_the_request_is_laid_out_for_the_prompt_cache(api, model, user):
    post(api, "first")
    post(api, "second")
    body = model.last_request["body"]
    # BUDDY_CACHE_TTL=auto in a chat answered within minutes (tests/conversations/test_cache.py).
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][-2]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    last = body["messages"][-1]["content"]
    assert last[-2]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}  # the last archived block
    assert "Current date and time (UTC)" in last[-1]["text"] and "cache_control" not in last[-1]
    assert "Alice" in body["system"][0]["text"]
    breakpoints = json.dumps(body).count('"cache_control"')
    assert breakpoints <= 4
    assert not Message.objects.filter(search_document__text__contains="Current date and time").exists()


def test_hydration_a_fresh_server_process_remembers(model, user, transactional_db):
    token = api_token_create(user=user)

    def ask(url: str, text: str) -> dict:
        request = urllib.request.Request(
            f"{url}/prompt",
            data=json.dumps({"text": text}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    with daphne() as url:
        ask(url, "My name is Diego")
    with daphne() as url:
        ask(url, "What is my name?")
    assert "Diego" in all_request_text(model.last_request)
    assert model.last_request["body"]["messages"][0]["content"][0]["text"] == "My name is Diego"


def test_isolation_a_secret_never_reaches_another_chat_or_user(api, model, user, other_user, client):
    post(api, "The launch code is PLUTO-7731", chat_id="a")
    post(api, "What did I tell you?", chat_id="b")
    assert "PLUTO-7731" not in all_request_text(model.last_request)
    client.force_login(other_user)
    post(client, "What did alice say?", chat_id="a")
    assert "PLUTO-7731" not in all_request_text(model.last_request)
    assert Session.objects.filter(user=other_user, chat_id="a").exists()


def test_the_canvas_is_in_every_request_after_its_tool_call_left_the_window(api, model, user, settings):
    settings.BUDDY_CONTEXT_TOKENS = 2500
    settings.BUDDY_MAX_PROMPT_TOKENS = 600
    tool_id = model.queue_tool_call("canvas_add_card", {"id": "plan", "title": "Pricing plan", "body": "Pro at 12 EUR"})
    model.queue_text("I put the plan on the canvas.")
    post(api, "Show me the plan")
    assert CanvasState.objects.get().elements[0]["title"] == "Pricing plan"
    for i in range(12):
        post(api, f"Tell me something else, number {i}: " + "filler words " * 40)
        assert "Pricing plan" in context_block(model.last_request)
    assert tool_id not in all_request_text(model.last_request)  # the call itself has left the window
    assert "card" in context_block(model.last_request) and "plan" in context_block(model.last_request)


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda m: m.fail_next(500, times=1), id="500"),
        pytest.param(lambda m: m.fail_next(529, times=1), id="529-overloaded"),
        pytest.param(lambda m: m.cut_stream_next(after_events=4), id="stream-cut"),
        pytest.param(lambda m: m.error_stream_next(after_events=4), id="error-mid-stream"),
        pytest.param(lambda m: m.hang_next(3), id="timeout"),
    ],
)
def test_a_provider_failure_is_a_502_the_prompt_stays_and_the_next_window_is_valid(api, model, settings, break_it):
    settings.BUDDY_LLM_TIMEOUT = 1.0
    break_it(model)
    response = post(api, "Will this work?")
    assert response.status_code == 502
    assert "model provider" in response.json()["detail"] or "stream" in response.json()["detail"]
    assert Message.objects.filter(role="user").count() == 1  # the prompt is archived
    assert ModelCall.objects.filter(error="").count() == 0 and ModelCall.objects.exclude(error="").count() == 1
    again = post(api, "And now?")  # the fake rejects an invalid window with a 400
    assert again.status_code == 200, again.content


def test_a_failure_mid_turn_after_a_tool_call_leaves_a_valid_window(api, model):
    calls = []

    def responder(request):
        calls.append(request)
        if len(calls) == 1:
            return _tool_reply(1)
        raise RuntimeError("boom")  # the fake answers the turn's second call with a 500

    model.responder = responder
    response = post(api, "Add a card please")
    assert response.status_code == 502
    roles = [m.role for m in Message.objects.order_by("id")]
    assert roles == ["user", "assistant", "user"]  # prompt, tool_use, tool_result: all archived
    model.responder = None
    assert post(api, "Still there?").status_code == 200


def test_the_sdk_retries_an_overload_before_giving_up(api, model, settings):
    settings.BUDDY_LLM_RETRIES = 2
    model.fail_next(529, times=1)
    assert post(api, "hello").status_code == 200


def test_cancel_during_the_stream_keeps_what_was_said_and_the_window_valid(model, session):
    full = "one two three four five six seven eight nine ten " * 30
    model.queue_text(full)
    model.delay_stream(0.7)  # the fake streams a text in three pieces: one every 0.7 s
    result = {}
    worker = threading.Thread(target=lambda: result.update(r=turn_run(session=session, text="Count slowly")))
    worker.start()
    deadline = time.monotonic() + 20
    while not model.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.6)  # the first piece has arrived, the rest has not
    assert turn_cancel(session=session)
    worker.join(timeout=20)
    model.delay_stream(0)
    assert result["r"].cancelled
    partial = Message.objects.filter(role="assistant").get()
    assert 0 < len(partial.content[0]["text"]) < len(full)
    assert full.startswith(partial.content[0]["text"])
    assert turn_run(session=session, text="Go on").reply.startswith("Echo:")


def test_cancel_between_model_calls_stops_after_the_tool_round(model, session, monkeypatch):
    import agent.turn

    real_round = agent.turn.tool_round_run

    def round_then_cancel(**kwargs):
        message = real_round(**kwargs)
        turn_cancel(session=session)  # the user pressed Stop while the tools ran
        return message

    monkeypatch.setattr(agent.turn, "tool_round_run", round_then_cancel)
    model.queue_tool_call("canvas_add_card", {"id": "c", "title": "C"})
    result = turn_run(session=session, text="Add a card")
    assert result.cancelled
    assert len(model.requests) == 1  # no second model call
    assert [m.role for m in Message.objects.order_by("id")] == ["user", "assistant", "user"]
    assert turn_run(session=session, text="Next").reply.startswith("Echo:")


def test_concurrent_prompts_to_one_chat_give_one_409_and_never_interleave(model, user, session):
    from django.test import Client

    from agent.turn import turn_is_running

    model.queue_text("a slow answer " * 20)
    model.delay_stream(0.5)  # the first turn streams for a few seconds
    statuses = []

    def send(text):
        client = Client()
        client.force_login(user)
        statuses.append(post(client, text).status_code)

    first = threading.Thread(target=send, args=("prompt 0",))
    first.start()
    deadline = time.monotonic() + 20
    while not turn_is_running(session=session) and time.monotonic() < deadline:
        time.sleep(0.05)
    send("prompt 1")  # while the first turn holds the lease
    first.join(timeout=30)
    model.delay_stream(0)
    assert sorted(statuses) == [200, 409]
    assert statuses[0] == 409  # the second one, refused while the first ran
    assert list(Message.objects.filter(is_turn_start=True).values_list("content", flat=True)) == [
        [{"type": "text", "text": "prompt 0"}]
    ]


def test_refused_prompts_are_not_archived(api, model, settings, client):
    settings.BUDDY_MAX_PROMPT_TOKENS = 50
    assert post(api, "x" * 400).status_code == 413
    assert post(api, "   ").status_code == 422
    assert post(api, "hi", chat_id="not valid!").status_code == 422
    assert post(api, "hi", agent="ghost").status_code == 404
    malformed = api.post("/prompt", "{not json", content_type="application/json")
    assert malformed.status_code == 422 and malformed.json()["code"] == "invalid_json"
    client.logout()
    assert post(client, "hi").status_code == 401
    assert not Message.objects.exists() and not Session.objects.exists()


def test_idempotency_key_returns_the_first_answer_and_runs_nothing(api, model):
    first = post(api, "once", headers={"Idempotency-Key": "k-1"})
    second = post(api, "once", headers={"Idempotency-Key": "k-1"})
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert len(model.requests) == 1
    assert Message.objects.filter(role="user").count() == 1


def test_idempotency_key_after_a_crash_mid_turn_answers_without_a_second_prompt(api, model, user):
    from agent.models import IdempotencyKey
    from conversations.services import message_append

    session = session_get_or_create(user=user, agent_slug=None, chat_id=None)
    prompt = message_append(session=session, role="user", content="lost reply?")
    IdempotencyKey.objects.create(user=user, key="k-crash", session=session, prompt=prompt)
    response = post(api, "lost reply?", headers={"Idempotency-Key": "k-crash"})
    assert response.status_code == 200
    assert response.json()["reply"] == "Echo: lost reply?"
    assert Message.objects.filter(role="user").count() == 1


def test_idempotency_key_after_a_crash_between_archiving_and_remembering_runs_the_prompt_once(api, model, user):
    """Found by bench/soak.py: a server killed after the prompt was archived but before the key
    recorded it left a key that answered 409 to every repeat, forever, and a prompt never answered.
    The lease, the prompt and the key now commit together; the repeat runs the prompt exactly once."""
    import agent.turn as turn_module
    from agent.models import IdempotencyKey
    from agent.submit import prompt_submit

    class Killed(BaseException):
        """The process dies here (a BaseException: nothing in the app may catch it)."""

    real_push = turn_module.push_frame_on_commit

    def die_once(*args, **kwargs):  # runs right after the prompt's INSERT
        turn_module.push_frame_on_commit = real_push
        raise Killed

    turn_module.push_frame_on_commit = die_once
    try:
        with pytest.raises(Killed):
            prompt_submit(user=user, text="did it run?", idempotency_key="k-killed")
    finally:
        turn_module.push_frame_on_commit = real_push
    assert not Message.objects.exists() and not IdempotencyKey.objects.exists(), "a half-begun turn was kept"

    response = post(api, "did it run?", headers={"Idempotency-Key": "k-killed"})
    assert response.status_code == 200, response.content
    assert response.json()["reply"] == "Echo: did it run?"
    again = post(api, "did it run?", headers={"Idempotency-Key": "k-killed"})
    assert again.json() == response.json()
    assert Message.objects.filter(role="user").count() == 1
    assert len(model.requests) == 1


def test_usage_none_cache_fields_count_as_zero():
    class Usage:
        input_tokens, output_tokens = 10, 3
        cache_read_input_tokens = None
        cache_creation_input_tokens = None

    assert usage_dict(Usage()) == {
        "input_tokens": 10,
        "output_tokens": 3,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_creation_5m_input_tokens": 0,
        "cache_creation_1h_input_tokens": 0,
    }


def test_parallel_tool_calls_are_answered_in_one_message_in_order(model, session):
    model.queue_reply(
        [
            {"type": "tool_use", "id": "toolu_a", "name": "canvas_add_card", "input": {"id": "a", "title": "A"}},
            {"type": "tool_use", "id": "toolu_b", "name": "canvas_add_card", "input": {"id": "b"}},
            {"type": "tool_use", "id": "toolu_c", "name": "get_extended_context", "input": {"count": 5}},
        ]
    )
    model.queue_text("done")
    turn_run(session=session, text="three things")
    results = Message.objects.order_by("id")[2].content
    assert [r["tool_use_id"] for r in results] == ["toolu_a", "toolu_b", "toolu_c"]
    assert "is_error" not in results[0] and results[1]["is_error"] is True  # b has no title
    assert "title" in results[1]["content"]
    assert [e["id"] for e in CanvasState.objects.get().elements] == ["a"]


def test_tool_calls_past_the_per_response_limit_get_an_error_result_and_change_nothing(model, session, settings):
    settings.BUDDY_MAX_TOOL_CALLS = 3
    model.queue_reply(
        [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "canvas_add_card", "input": {"id": f"c{i}", "title": "C"}}
            for i in range(5)
        ]
    )
    model.queue_text("done")
    turn_run(session=session, text="five cards at once")
    results = Message.objects.order_by("id")[2].content
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(5)]  # every call answered
    assert [r.get("is_error", False) for r in results] == [False, False, False, True, True]
    assert "at most 3 tool calls" in results[3]["content"] and "next response" in results[3]["content"]
    assert [e["id"] for e in CanvasState.objects.get().elements] == ["c0", "c1", "c2"]
    assert model.requests[-1]["body"]["messages"][-1]["content"][4]["is_error"] is True  # the model is told


def test_the_tool_round_limit_ends_the_turn_with_a_clear_message(model, session, settings):
    settings.BUDDY_MAX_TOOL_ROUNDS = 2
    counter = iter(range(100))
    model.responder = lambda request: _tool_reply(next(counter))
    result = turn_run(session=session, text="loop forever")
    assert len(model.requests) == 2
    assert "limit of 2 rounds" in result.reply
    assert Message.objects.order_by("-id").first().role == "assistant"


def _tool_reply(n: int):
    from devtools.fake_anthropic import Reply

    return Reply(
        [
            {
                "type": "tool_use",
                "id": f"toolu_loop{n}",
                "name": "canvas_add_card",
                "input": {"id": f"l{n}", "title": "L"},
            }
        ]
    )


def test_offline_model_runs_the_canvas_grammar(session, settings):
    settings.BUDDY_LLM = "offline"
    grammar = 'CANVAS: [{"name": "canvas_add_card", "input": {"id": "hi", "title": "Hello"}}]'
    result = turn_run(session=session, text=grammar)
    assert "1 canvas change" in result.reply
    assert CanvasState.objects.get(session=session).elements[0]["title"] == "Hello"
    assert turn_run(session=session, text="plain words").reply == "(offline demo) You said: plain words"
    broken = turn_run(session=session, text="CANVAS: [oops")
    assert "could not read" in broken.reply


def test_an_unknown_tool_is_told_which_tools_there_are(session):
    from agent.tools import tool_round_run

    result = tool_round_run(session=session, tool_uses=[{"id": "t1", "name": "canvas_draw", "input": {}}])
    text = result.content[0]["content"]
    assert result.content[0]["is_error"] and "Unknown tool 'canvas_draw'" in text
    for name in ["canvas_add_card", "canvas_show_chart", "canvas_remove_element", "search_history", "schedule_prompt"]:
        assert name in text


def _every_archived_message_is_sendable() -> None:
    """What an import accepts is what a request may hold: the archive passes the same check."""
    from conversations.content import validate_content

    for message in Message.objects.order_by("id"):
        validate_content(message.role, message.content)


def test_a_tool_call_whose_input_is_not_an_object_is_answered_with_an_error_and_the_chat_goes_on(model, session):
    model.queue_reply([{"type": "tool_use", "id": "toolu_list", "name": "canvas_add_card", "input": [1, 2, 3]}])
    model.queue_text("Sorry, that was not a card.")
    assert turn_run(session=session, text="a card please").reply == "Sorry, that was not a card."
    call, results = Message.objects.order_by("id")[1:3]
    assert call.content == [{"type": "tool_use", "id": "toolu_list", "name": "canvas_add_card", "input": {}}]
    assert results.content[0]["is_error"] is True and "JSON object" in results.content[0]["content"]
    assert not CanvasState.objects.filter(session=session).exclude(elements=[]).exists()  # nothing was run
    model.queue_text("Still here.")
    assert turn_run(session=session, text="and now?").reply == "Still here."  # the provider took the history
    _every_archived_message_is_sendable()


def test_tool_calls_with_a_repeated_or_invalid_id_or_no_name_each_run_and_are_answered(model, session):
    model.queue_reply(
        [
            {"type": "tool_use", "id": "toolu_dup", "name": "canvas_add_card", "input": {"id": "c2", "title": "Two"}},
            {"type": "tool_use", "id": "toolu_dup", "name": "canvas_add_card", "input": {"id": "c3", "title": "Three"}},
            {"type": "tool_use", "id": "../../x y", "name": "", "input": {}},
        ]
    )
    model.queue_text("done")
    turn_run(session=session, text="three calls")
    call, results = Message.objects.order_by("id")[1:3]
    ids = [block["id"] for block in call.content]
    assert ids[0] == "toolu_dup" and len(set(ids)) == 3
    assert [block["tool_use_id"] for block in results.content] == ids
    assert [e["id"] for e in CanvasState.objects.get().elements] == ["c2", "c3"]  # the repeated id ran too
    assert call.content[2]["name"] == "unnamed_tool" and "Unknown tool" in results.content[2]["content"]
    model.queue_text("Still here.")
    assert turn_run(session=session, text="and now?").reply == "Still here."
    _every_archived_message_is_sendable()


def test_an_archived_tool_call_the_provider_would_refuse_is_sent_as_a_note(model, session):
    """A chat whose archive holds such a call (written before the calls were made sendable, or imported
    by hand into the database) still gets answers: the window sends the call as a text note."""
    from conversations.services import message_append

    message_append(session=session, role="user", content="a card please")
    message_append(
        session=session,
        role="assistant",
        content=[{"type": "tool_use", "id": "toolu_old", "name": "canvas_add_card", "input": [1, 2]}],
    )
    message_append(
        session=session,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "toolu_old", "content": "error", "is_error": True}],
    )
    model.queue_text("Here again.")
    assert turn_run(session=session, text="hello?").reply == "Here again."
    sent = all_request_text(model.requests[-1])
    assert "tool call toolu_old (canvas_add_card) not sent: invalid here" in sent


def test_a_tool_call_reusing_an_id_of_the_window_gets_a_fresh_one(model, session):
    """The API refuses a request whose tool_use ids repeat, across messages too."""
    model.queue_tool_call("canvas_add_card", {"id": "c1", "title": "One"}, id="toolu_same")
    model.queue_tool_call("canvas_add_card", {"id": "c2", "title": "Two"}, id="toolu_same")
    model.queue_text("two cards")
    assert turn_run(session=session, text="two cards, one by one").reply == "two cards"
    calls = [m.content[0]["id"] for m in Message.objects.filter(role="assistant").order_by("id")[:2]]
    assert calls[0] == "toolu_same" and calls[1] != "toolu_same"
    assert [e["id"] for e in CanvasState.objects.get().elements] == ["c1", "c2"]
    model.queue_text("Still here.")
    assert turn_run(session=session, text="and now?").reply == "Still here."


def test_a_tool_call_cut_off_by_the_output_limit_is_not_run_and_the_model_is_told(model, session):
    """Its input is whatever had arrived when the limit struck: a card with half a body, a note with half
    its text. The calls before it in the reply were whole, and run."""
    model.queue_reply(
        [
            {"type": "tool_use", "id": "toolu_whole", "name": "canvas_add_card", "input": {"id": "a", "title": "A"}},
            {"type": "tool_use", "id": "toolu_cut", "name": "canvas_add_card", "input": {"id": "b", "title": "B"}},
        ],
        stop_reason="max_tokens",
    )
    model.queue_text("I will keep it shorter.")
    assert turn_run(session=session, text="two cards").reply == "I will keep it shorter."
    results = Message.objects.order_by("id")[2].content
    assert [r["tool_use_id"] for r in results] == ["toolu_whole", "toolu_cut"]
    assert "is_error" not in results[0] and results[1]["is_error"] is True
    assert "output token limit" in results[1]["content"]
    assert [e["id"] for e in CanvasState.objects.get().elements] == ["a"]
    assert model.requests[-1]["body"]["messages"][-1]["content"][1]["is_error"] is True  # the model is told
