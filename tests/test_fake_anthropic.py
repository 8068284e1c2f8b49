"""The fake Messages API speaks the real protocol: the real SDK streams, parses, retries and times
out against it, and it rejects and caches what the real API rejects and caches."""

from __future__ import annotations

import os
import socket
import threading

import anthropic
import httpx2
import pytest

from devtools.fake_anthropic import MIN_CACHEABLE_TOKENS, FakeAnthropic, Reply, cost_units

MODEL = "claude-haiku-4-5"
# Over 1,024 tokens at 4 characters a token, once serialised.
BIG_TEXT = "You are Buddy, a patient assistant who draws on a canvas. " * 80


@pytest.fixture
def server():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def client(server):
    return server.client()


def user(text: str, **extra) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


def assistant(text: str, **extra) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text, **extra}]}


def tool_use(tool_use_id: str, name: str = "draw", input: dict | None = None) -> dict:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": input or {}}


def tool_result(tool_use_id: str, content: str = "ok") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


DRAW_TOOL = {
    "name": "draw",
    "description": "Put an element on the canvas.",
    "input_schema": {"type": "object", "properties": {"shape": {"type": "string"}}},
}
EPHEMERAL = {"type": "ephemeral"}


# --- replies -----------------------------------------------------------------------------------


def test_plain_request_echoes_the_last_user_text(server, client):
    message = client.messages.create(model=MODEL, max_tokens=100, messages=[user("hello there")])

    assert [block.text for block in message.content] == ["Echo: hello there"]
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.usage.output_tokens > 0
    assert server.last_request["body"]["messages"] == [user("hello there")]
    assert server.last_request["headers"]["authorization"] == "Bearer test-key"


def test_stream_gives_the_text_in_pieces_and_the_same_final_message(client):
    with client.messages.stream(model=MODEL, max_tokens=100, messages=[user("tell me a story")]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()

    assert len(pieces) > 1
    assert "".join(pieces) == "Echo: tell me a story"
    assert final.content[0].text == "Echo: tell me a story"
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens > 0
    assert final.usage.output_tokens > 1


def test_stream_events_come_in_the_real_api_order(client):
    events = client.messages.create(model=MODEL, max_tokens=100, messages=[user("hi")], stream=True)

    kinds = [event.type for event in events]

    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start"
    assert "content_block_delta" in kinds
    assert kinds[-3] == "content_block_stop"


def test_queued_replies_are_used_in_order_then_the_default(client, server):
    server.queue_text("first")
    server.queue_reply([{"type": "text", "text": "second"}], stop_reason="max_tokens")

    answers = [client.messages.create(model=MODEL, max_tokens=100, messages=[user("q")]) for _ in range(3)]

    assert [answer.content[0].text for answer in answers] == ["first", "second", "Echo: q"]
    assert [answer.stop_reason for answer in answers] == ["end_turn", "max_tokens", "end_turn"]


def test_responder_answers_from_the_request(client, server):
    server.responder = lambda body: Reply([{"type": "text", "text": f"{len(body['messages'])} messages"}])

    message = client.messages.create(model=MODEL, max_tokens=100, messages=[user("a"), assistant("b"), user("c")])

    assert message.content[0].text == "3 messages"


def test_tool_call_round_trip_through_a_stream(client, server):
    tool_input = {"shape": "circle", "label": 'a "quoted" ✓ label', "points": [1, 2, 3]}
    tool_use_id = server.queue_tool_call("draw", tool_input, text="Drawing it.")

    with client.messages.stream(
        model=MODEL, max_tokens=200, tools=[DRAW_TOOL], messages=[user("draw a circle")]
    ) as stream:
        final = stream.get_final_message()

    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Drawing it."
    call = final.content[1]
    assert (call.type, call.id, call.name, call.input) == ("tool_use", tool_use_id, "draw", tool_input)
    assert tool_use_id.startswith("toolu_")

    follow_up = client.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=[DRAW_TOOL],
        messages=[
            user("draw a circle"),
            {
                "role": "assistant",
                "content": [block.model_dump(exclude_none=True) for block in final.content],
            },
            {"role": "user", "content": [tool_result(tool_use_id, "drawn")]},
        ],
    )
    assert follow_up.stop_reason == "end_turn"


def test_tool_input_is_streamed_as_several_json_pieces(client, server):
    tool_input = {"shape": "rectangle", "title": "A rather long title to split"}
    server.queue_tool_call("draw", tool_input)

    events = client.messages.create(
        model=MODEL, max_tokens=200, tools=[DRAW_TOOL], messages=[user("draw")], stream=True
    )
    pieces = [
        event.delta.partial_json
        for event in events
        if event.type == "content_block_delta" and event.delta.type == "input_json_delta"
    ]

    assert len([piece for piece in pieces if piece]) >= 3
    assert "".join(pieces) == '{"shape":"rectangle","title":"A rather long title to split"}'


# --- validation --------------------------------------------------------------------------------

INVALID_REQUESTS = {
    "first message from the assistant": (
        {"messages": [assistant("hi"), user("hello")]},
        'first message must use the "user" role',
    ),
    "unknown role": (
        {"messages": [{"role": "robot", "content": "hi"}]},
        "Input should be 'user' or 'assistant'",
    ),
    "system role in messages": (
        {"messages": [{"role": "system", "content": "hi"}]},
        'Unexpected role "system"',
    ),
    "tool_use without a result": (
        {
            "messages": [
                user("draw"),
                {"role": "assistant", "content": [tool_use("toolu_01a")]},
                user("and?"),
            ]
        },
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_01a",
    ),
    "tool_result without a tool_use": (
        {
            "messages": [
                user("draw"),
                assistant("ok"),
                {"role": "user", "content": [tool_result("toolu_01x")]},
            ]
        },
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_01x",
    ),
    "tool_result after text": (
        {
            "messages": [
                user("draw"),
                {"role": "assistant", "content": [tool_use("toolu_01a")]},
                {"role": "user", "content": [{"type": "text", "text": "here"}, tool_result("toolu_01a")]},
            ]
        },
        "`tool_result` blocks must come first",
    ),
    "empty text block": ({"messages": [user("")]}, "text content blocks must be non-empty"),
    "empty system text block": (
        {"system": [{"type": "text", "text": ""}], "messages": [user("hi")]},
        "system.0.text: text content blocks must be non-empty",
    ),
    "empty content": ({"messages": [{"role": "user", "content": []}]}, "must have non-empty content"),
    "duplicate tool names": (
        {"tools": [DRAW_TOOL, DRAW_TOOL], "messages": [user("hi")]},
        "Tool names must be unique",
    ),
    "five cache breakpoints": (
        {
            "system": [{"type": "text", "text": f"part {n}", "cache_control": EPHEMERAL} for n in range(3)],
            "messages": [
                user("a", cache_control=EPHEMERAL),
                assistant("b"),
                user("c", cache_control=EPHEMERAL),
            ],
        },
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    "cache_control of an unknown type": (
        {"messages": [user("a", cache_control={"type": "forever"})]},
        "cache_control.type: Input should be 'ephemeral'",
    ),
    "an image in an assistant message": (
        {
            "messages": [
                user("show me"),
                {"role": "assistant", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]},
                user("thanks"),
            ]
        },
        "'image' blocks are not allowed in assistant messages",
    ),
    "a tool_use id with spaces": (
        {
            "messages": [
                user("draw"),
                {"role": "assistant", "content": [tool_use("tool use 1")]},
                {"role": "user", "content": [tool_result("tool use 1")]},
            ]
        },
        "id: String should match pattern",
    ),
    "missing max_tokens": ({"max_tokens": None, "messages": [user("hi")]}, "max_tokens: Field required"),
    "missing model": ({"model": None, "messages": [user("hi")]}, "model: Field required"),
    "trailing whitespace in a prefill": (
        {"messages": [user("hi"), assistant("Sure ")]},
        "final assistant content cannot end with trailing whitespace",
    ),
}


@pytest.mark.parametrize("overrides, message", INVALID_REQUESTS.values(), ids=INVALID_REQUESTS.keys())
def test_invalid_requests_are_rejected_like_the_real_api(client, overrides, message):
    body = {"model": MODEL, "max_tokens": 100, **overrides}
    body = {key: value for key, value in body.items() if value is not None}

    # The generic post, because the typed create() would refuse a missing model client-side.
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.post("/v1/messages", body=body, cast_to=httpx2.Response)

    assert caught.value.status_code == 400
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert message in caught.value.body["error"]["message"]


def test_consecutive_messages_of_one_role_are_merged_not_rejected(client):
    # Merged, the last user message is [tool_result, text]: the result comes first, as required.
    message = client.messages.create(
        model=MODEL,
        max_tokens=100,
        tools=[DRAW_TOOL],
        messages=[
            user("draw"),
            user("a circle please"),
            {"role": "assistant", "content": [tool_use("toolu_01a")]},
            {"role": "user", "content": [tool_result("toolu_01a")]},
            user("thanks"),
        ],
    )

    assert message.content[0].text == "Echo: thanks"


def test_a_request_without_a_key_gets_the_real_401(server):
    response = httpx2.post(
        f"{server.base_url}/v1/messages",
        headers={"anthropic-version": "2023-06-01"},
        json={"model": MODEL, "max_tokens": 10, "messages": [user("hi")]},
    )

    assert response.status_code == 401
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"


def test_x_api_key_header_is_accepted_and_a_wrong_key_is_not():
    with FakeAnthropic(api_key="right-key") as server:
        request = {"model": MODEL, "max_tokens": 10, "messages": [user("hi")]}
        response = httpx2.post(
            f"{server.base_url}/v1/messages",
            headers={"x-api-key": "right-key", "anthropic-version": "2023-06-01"},
            json=request,
        )
        assert response.status_code == 200

        with pytest.raises(anthropic.AuthenticationError):
            server.client(api_key="wrong-key").messages.create(**request)


# --- failures on demand ------------------------------------------------------------------------


def test_fail_next_500_raises_internal_server_error(client, server):
    server.fail_next(status=500)

    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")])

    assert caught.value.body["error"]["type"] == "api_error"
    assert client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")]).content


def test_fail_next_529_is_overloaded(client, server):
    server.fail_next(status=529)

    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")])

    assert caught.value.status_code == 529
    assert caught.value.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_fail_next_429_is_a_rate_limit(client, server):
    server.fail_next(status=429)

    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")])


@pytest.mark.parametrize("status", [500, 529])
def test_the_sdk_retries_past_one_failure(server, status):
    server.fail_next(status=status, times=1)
    client = server.client(max_retries=2)

    message = client.messages.create(model=MODEL, max_tokens=10, messages=[user("again")])

    assert message.content[0].text == "Echo: again"
    assert len(server.requests) == 2
    assert server.requests[1]["headers"]["x-stainless-retry-count"] == "1"


def test_a_hung_request_times_out_in_the_client(server):
    server.hang_next(30)
    client = server.client(timeout=0.5)

    with pytest.raises(anthropic.APITimeoutError):
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")])

    # The hang consumed no scripted reply and the server still answers.
    assert client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")]).content[0].text == "Echo: hi"


def test_a_cut_stream_raises_in_the_sdk(client, server):
    server.cut_stream_next(after_events=4)

    with (
        pytest.raises((httpx2.TransportError, anthropic.APIConnectionError)),
        client.messages.stream(model=MODEL, max_tokens=100, messages=[user("a long answer")]) as stream,
    ):
        stream.get_final_message()


def test_an_error_event_mid_stream_raises_the_real_error(client, server):
    server.error_stream_next(after_events=3, status=529)

    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(model=MODEL, max_tokens=100, messages=[user("hi")]) as stream,
    ):
        stream.get_final_message()

    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_a_client_that_leaves_a_slow_stream_does_not_break_the_server(client, server):
    server.delay_stream(0.05)
    with client.messages.stream(model=MODEL, max_tokens=100, messages=[user("slow")]) as stream:
        first = next(iter(stream.text_stream))
    assert first

    server.delay_stream(0)
    assert client.messages.create(model=MODEL, max_tokens=10, messages=[user("next")]).content[0].text == ("Echo: next")


def test_requests_from_many_threads_are_all_recorded(server):
    client = server.client()

    def call(n: int) -> None:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user(f"call {n}")])

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    texts = sorted(request["body"]["messages"][0]["content"][0]["text"] for request in server.requests)
    assert texts == sorted(f"call {n}" for n in range(8))


def test_accepted_connections_send_without_waiting_for_acks(client, server):
    """TCP_NODELAY on every connection the server accepts: small writes (each SSE event) leave at once
    instead of waiting for the client's delayed ACK of the previous one."""
    client.messages.create(model=MODEL, max_tokens=10, messages=[user("hello")])
    with server._lock:
        connections = list(server._connections)  # the SDK keeps its connection alive
    assert connections
    for connection in connections:
        assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


# --- prompt caching ----------------------------------------------------------------------------


def cached_system() -> list[dict]:
    return [{"type": "text", "text": BIG_TEXT, "cache_control": EPHEMERAL}]


def create(client, messages, system=None):
    return client.messages.create(model=MODEL, max_tokens=100, system=system or cached_system(), messages=messages)


def total_tokens(client, messages, system=None) -> int:
    return client.messages.count_tokens(model=MODEL, system=system or cached_system(), messages=messages).input_tokens


def system_tokens(client, system=None) -> int:
    """Tokens of the system prompt (and nothing else) as the cache counts them."""
    without = client.messages.count_tokens(model=MODEL, messages=[user("x")]).input_tokens
    return total_tokens(client, [user("x")], system=system) - without


def test_an_identical_request_reads_its_prefix_from_the_cache(client):
    messages = [user("hello")]

    first = create(client, messages).usage
    second = create(client, messages).usage

    assert first.cache_creation_input_tokens >= MIN_CACHEABLE_TOKENS
    assert first.cache_read_input_tokens == 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    assert second.input_tokens == first.input_tokens
    assert cost_units(second) < cost_units(first)


def test_a_request_grown_by_a_turn_reads_the_old_prefix_and_writes_the_new_part(client):
    short = [user("first question", cache_control=EPHEMERAL)]
    longer = [
        user("first question"),
        assistant("first answer"),
        user("second question", cache_control=EPHEMERAL),
    ]

    first = create(client, short).usage
    second = create(client, longer).usage

    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0
    total = total_tokens(client, longer)
    assert second.input_tokens + second.cache_read_input_tokens + second.cache_creation_input_tokens == total
    # The breakpoint is on the last block, so nothing is left uncached.
    assert second.input_tokens == 0


def test_a_prefix_below_1024_tokens_is_never_cached(client):
    system = [{"type": "text", "text": "Short prompt.", "cache_control": EPHEMERAL}]
    messages = [user("hello", cache_control=EPHEMERAL)]

    usages = [create(client, messages, system=system).usage for _ in range(2)]

    for usage in usages:
        assert usage.cache_creation_input_tokens == 0
        assert usage.cache_read_input_tokens == 0
        assert usage.input_tokens == total_tokens(client, messages, system=system)


def test_a_cached_prefix_more_than_20_blocks_back_is_not_found(client):
    create(client, [user("start", cache_control=EPHEMERAL)])
    grown = [user("start")]
    for n in range(11):
        grown += [assistant(f"answer {n}"), user(f"question {n}")]
    grown[-1] = user("question 10", cache_control=EPHEMERAL)

    usage = create(client, grown, system=[{"type": "text", "text": BIG_TEXT}]).usage

    # 22 blocks after the cached one and no breakpoint on the system prompt: nothing is read.
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == total_tokens(client, grown)


def test_moving_the_breakpoint_keeps_the_cached_content(client):
    create(client, [user("q1", cache_control=EPHEMERAL), assistant("a1"), user("q2")])

    usage = create(client, [user("q1"), assistant("a1"), user("q2", cache_control=EPHEMERAL)]).usage

    assert usage.cache_read_input_tokens > MIN_CACHEABLE_TOKENS
    assert usage.cache_creation_input_tokens > 0


def test_reset_cache_forgets_every_prefix(client, server):
    create(client, [user("hello")])
    server.reset_cache()

    usage = create(client, [user("hello")]).usage

    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens >= MIN_CACHEABLE_TOKENS


def test_more_than_four_breakpoints_is_a_400(client):
    system = [{"type": "text", "text": f"{BIG_TEXT} {n}", "cache_control": EPHEMERAL} for n in range(4)]

    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        create(client, [user("hello", cache_control=EPHEMERAL)], system=system)


# --- cache lifetimes ----------------------------------------------------------------------------

ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE_MINUTES = {"type": "ephemeral", "ttl": "5m"}


def test_a_5_minute_entry_expires_after_5_minutes_without_a_hit(client, server):
    create(client, [user("hello")])

    server.clock.advance(minutes=4, seconds=59)
    just_in_time = create(client, [user("hello")]).usage
    server.clock.advance(minutes=5, seconds=1)
    too_late = create(client, [user("hello")]).usage

    assert just_in_time.cache_read_input_tokens >= MIN_CACHEABLE_TOKENS
    assert too_late.cache_read_input_tokens == 0
    assert too_late.cache_creation_input_tokens == just_in_time.cache_read_input_tokens
    assert too_late.cache_creation.ephemeral_5m_input_tokens == too_late.cache_creation_input_tokens


def test_every_hit_refreshes_the_entry_for_another_5_minutes(client, server):
    written = create(client, [user("hello")]).usage

    reads = []
    for _ in range(4):  # 16 minutes after the write, never 5 without a hit
        server.clock.advance(minutes=4)
        reads.append(create(client, [user("hello")]).usage.cache_read_input_tokens)

    assert reads == [written.cache_creation_input_tokens] * 4


def test_a_hit_on_a_longer_prefix_refreshes_the_entries_inside_it(client, server):
    create(client, [user("q1", cache_control=EPHEMERAL)])  # writes the system prompt and q1
    longer = [user("q1"), assistant("a1"), user("q2", cache_control=EPHEMERAL)]
    for _ in range(3):
        server.clock.advance(minutes=4)
        create(client, longer)

    # 16 minutes after it was written, the system prompt's entry was never asked for alone, only read
    # inside the longer prefix: it is alive.
    server.clock.advance(minutes=4)
    usage = create(client, [user("something else")]).usage

    assert usage.cache_read_input_tokens == pytest.approx(system_tokens(client), abs=1)  # ceil per prefix


def test_a_1_hour_entry_survives_a_20_minute_gap_where_a_5_minute_one_does_not(client, server):
    long_lived = [{"type": "text", "text": BIG_TEXT, "cache_control": ONE_HOUR}]
    short_lived = [{"type": "text", "text": BIG_TEXT + " Short-lived.", "cache_control": FIVE_MINUTES}]
    first_long = create(client, [user("hello")], system=long_lived).usage
    create(client, [user("hello")], system=short_lived)

    server.clock.advance(minutes=20)
    long_again = create(client, [user("hello")], system=long_lived).usage
    short_again = create(client, [user("hello")], system=short_lived).usage

    assert first_long.cache_creation.ephemeral_1h_input_tokens == first_long.cache_creation_input_tokens > 0
    assert first_long.cache_creation.ephemeral_5m_input_tokens == 0
    assert long_again.cache_read_input_tokens == first_long.cache_creation_input_tokens
    assert long_again.cache_creation_input_tokens == 0
    assert short_again.cache_read_input_tokens == 0


def test_a_1_hour_entry_expires_after_an_hour_without_a_hit(client, server):
    long_lived = [{"type": "text", "text": BIG_TEXT, "cache_control": ONE_HOUR}]
    create(client, [user("hello")], system=long_lived)

    server.clock.advance(minutes=59)
    kept = create(client, [user("hello")], system=long_lived).usage
    server.clock.advance(minutes=61)
    lost = create(client, [user("hello")], system=long_lived).usage

    assert kept.cache_read_input_tokens >= MIN_CACHEABLE_TOKENS
    assert lost.cache_read_input_tokens == 0
    assert lost.cache_creation.ephemeral_1h_input_tokens == kept.cache_read_input_tokens


def test_mixed_lifetimes_bill_each_stretch_at_its_own_lifetime(client, server):
    system = [{"type": "text", "text": BIG_TEXT, "cache_control": ONE_HOUR}]
    conversation = [user("q1"), assistant("a1 " * 300, cache_control=ONE_HOUR), user("q2", cache_control=FIVE_MINUTES)]

    first = create(client, conversation, system=system).usage
    server.clock.advance(minutes=20)  # the 5-minute tail is gone, the 1-hour entries are not
    second = create(client, conversation, system=system).usage

    whole = total_tokens(client, conversation, system=system)
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation.ephemeral_1h_input_tokens + first.cache_creation.ephemeral_5m_input_tokens == whole
    assert first.cache_creation.ephemeral_1h_input_tokens > system_tokens(client, system) + 200  # up to a1 (225 tokens)
    assert 0 < first.cache_creation.ephemeral_5m_input_tokens < 20  # q2 alone
    assert second.cache_read_input_tokens == first.cache_creation.ephemeral_1h_input_tokens
    assert second.cache_creation.ephemeral_5m_input_tokens == first.cache_creation.ephemeral_5m_input_tokens
    assert second.cache_creation.ephemeral_1h_input_tokens == 0
    assert cost_units(first) == pytest.approx(
        2.0 * first.cache_creation.ephemeral_1h_input_tokens + 1.25 * first.cache_creation.ephemeral_5m_input_tokens
    )


def test_a_1_hour_breakpoint_after_a_5_minute_one_is_a_400(client, server):
    system = [{"type": "text", "text": BIG_TEXT, "cache_control": FIVE_MINUTES}]

    with pytest.raises(anthropic.BadRequestError, match="ttl='1h' cache_control block must not come after") as caught:
        create(client, [user("hello", cache_control=ONE_HOUR)], system=system)

    assert "messages.0.content.0.cache_control" in caught.value.message
    assert "system.0" in caught.value.message
    # A breakpoint without a ttl is a 5-minute one: the same request with the default is refused too.
    with pytest.raises(anthropic.BadRequestError, match="must not come after"):
        client.messages.create(
            model=MODEL,
            max_tokens=10,
            tools=[{**DRAW_TOOL, "cache_control": EPHEMERAL}],
            system=[{"type": "text", "text": BIG_TEXT, "cache_control": ONE_HOUR}],
            messages=[user("hello")],
        )
    assert len(server.cache) == 0


def test_streamed_usage_carries_the_lifetime_breakdown(client, server):
    system = [{"type": "text", "text": BIG_TEXT, "cache_control": ONE_HOUR}]
    with client.messages.stream(model=MODEL, max_tokens=50, system=system, messages=[user("hi")]) as stream:
        usage = stream.get_final_message().usage

    assert usage.cache_creation.ephemeral_1h_input_tokens == usage.cache_creation_input_tokens > 0
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0


def test_cost_units_prices_each_lifetime():
    api_shape = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 2000,
        "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    }
    recorded_shape = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 2000,
        "cache_creation_1h_input_tokens": 400,
    }

    assert cost_units(api_shape) == cost_units(recorded_shape) == pytest.approx(100 + 600 * 1.25 + 400 * 2 + 200)


def test_cost_units_weighs_writes_and_reads():
    usage = {"input_tokens": 100, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000}

    assert cost_units(usage) == pytest.approx(100 + 1250 + 200)
    assert cost_units({"input_tokens": 10}) == 10


# --- the fixture -------------------------------------------------------------------------------


def test_fixture_points_settings_and_environment_at_the_server(fake_anthropic, settings):
    assert settings.BUDDY_LLM == "anthropic"
    assert fake_anthropic.base_url == settings.ANTHROPIC_BASE_URL
    assert os.environ["ANTHROPIC_BASE_URL"] == fake_anthropic.base_url

    # A client configured only from the environment, as a subprocess would be, reaches the fake.
    message = anthropic.Anthropic(max_retries=0).messages.create(
        model=MODEL, max_tokens=10, messages=[user("from the environment")]
    )

    assert message.content[0].text == "Echo: from the environment"
    assert fake_anthropic.last_request["headers"]["authorization"] == "Bearer test-key"


def test_a_failing_responder_gives_a_clear_500(client, server):
    server.responder = lambda body: 1 / 0

    with pytest.raises(anthropic.InternalServerError, match="fake responder failed: ZeroDivisionError"):
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("hi")])
