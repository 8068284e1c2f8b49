"""What a plain turn asks of the database: a fixed, small number of queries (docs/architecture.md,
"A turn's queries")."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.submit import prompt_submit
from conversations.models import Message
from conversations.refs import ChatRef
from memory.models import Summary
from memory.summaries import summary_is_due
from realtime.models import RelayedFrame

pytestmark = pytest.mark.django_db(transaction=True)

# docs/architecture.md, "A turn's queries", lists them.
MAX_QUERIES = 15
CHAT = ChatRef(agent="buddy", chat_id="main")


def queries_of_a_turn(user, text: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        prompt_submit(user=user, text=text, chat=CHAT)
    return [query["sql"] for query in queries.captured_queries]


@pytest.fixture
def plain_turns(model, settings, monkeypatch):
    from realtime import push

    monkeypatch.setattr(push, "_serves_sockets", True)  # as in the server process (buddy/asgi.py)
    # A turn slower than the cancel poll (a loaded machine) renews its lease while it streams: a query
    # that depends on the clock, not on the turn.
    monkeypatch.setattr("agent.turn.CANCEL_POLL_SECONDS", 3600)
    settings.BUDDY_PROMPTS_PER_MINUTE = 0  # the rate limit's own queries are not the turn's
    settings.BUDDY_SUMMARIES = True
    settings.BUDDY_CACHE_TTL = "auto"


def test_a_plain_turn_makes_at_most_15_queries(user, plain_turns):
    prompt_submit(user=user, text="the chat's first turn", chat=CHAT)
    queries = queries_of_a_turn(user, "and a second one")
    assert len(queries) <= MAX_QUERIES, "\n".join(queries)
    assert Message.objects.count() == 4


def test_turns_past_window_steps_queue_the_summary_exactly_when_due_within_the_limit(
    user, plain_turns, settings, monkeypatch
):
    """The summary decision comes from the turn's own window: it agrees with summary_is_due, which
    builds the window again, turn after turn across window steps — and costs no query."""
    import agent.turn
    from agent.tasks import summary_update
    from conversations.models import Session
    from memory.summaries import summary_is_due

    settings.BUDDY_WINDOW_ROWS = 6
    queued: list[int] = []
    monkeypatch.setattr(agent.turn, "async_task", lambda name, session_id, **options: queued.append(session_id))
    decisions, start = [], 0
    for n in range(12):
        queued.clear()
        queries = queries_of_a_turn(user, f"turn {n}")
        session = Session.objects.get()
        stepped, start = session.window_start_id != start, session.window_start_id
        # The first turn creates the chat; a step stores the window's new start (3 queries more, once
        # every many turns at the real window sizes).
        if n > 0:
            assert len(queries) <= MAX_QUERIES + (3 if stepped else 0), "\n".join(queries)
        decisions.append(bool(queued))
        assert bool(queued) == summary_is_due(session=session), n
        if queued:
            summary_update(session.pk)  # as the worker would
    assert True in decisions and Summary.objects.exists() and session.window_start_id


def test_a_turn_writes_no_relayed_frames_in_the_process_serving_the_sockets(user, plain_turns):
    queries_of_a_turn(user, "hello")
    assert not RelayedFrame.objects.exists()


@pytest.mark.parametrize(("interval", "deltas"), [(0, 3), (3600, 2)])
def test_streamed_text_is_sent_in_at_most_one_delta_per_interval(
    user, plain_turns, settings, monkeypatch, interval, deltas
):
    """The first piece goes at once; what streams within BUDDY_DELTA_INTERVAL of it waits for the end of
    the answer (the fake streams each text in 3 pieces). Together the deltas are the reply."""
    from realtime import push

    settings.BUDDY_DELTA_INTERVAL = interval
    sent: list[dict] = []
    group_send = push._group_send
    monkeypatch.setattr(push, "_group_send", lambda group, message: (sent.append(message), group_send(group, message)))
    reply = prompt_submit(user=user, text="tell me something", chat=CHAT)
    texts = [m["frame"]["text"] for m in sent if m["frame"]["type"] == "assistant_delta"]
    assert len(texts) == deltas
    assert "".join(texts) == reply.reply == "Echo: tell me something"
    # The chat's last frame is the reply; the user's chat lists heard of the turn once, with its prompt.
    chat_frames = [m["frame"]["type"] for m in sent if m["frame"]["type"] != "chats_changed"]
    assert chat_frames[-1] == "assistant_message"
    assert [m["frame"]["change"] for m in sent if m["frame"]["type"] == "chats_changed"] == ["message"]


def _documents() -> dict[int, tuple[str, str]]:
    from memory.models import SearchDocument

    return {d.message_id: (d.terms, d.context) for d in SearchDocument.objects.all()}


def _expected_document(message: Message, before: Message, documents) -> tuple[str, str]:
    """A prompt's terms, and its context: the terms of the message before it (memory.search.documents)."""
    from conversations.content import readable_text
    from textsearch.text import index_terms, join_terms, search_context

    terms = join_terms(index_terms(readable_text(message.content)))
    return terms, search_context(previous=documents[before.id][0], turn_start=None)


@pytest.mark.parametrize("ending", ["reply", "tool round", "model failure"])
def test_the_prompt_is_indexed_with_the_turn_whatever_ends_it(user, plain_turns, model, ending):
    """The prompt's search document waits for the turn's first reply (one batch with it), or for the
    turn's end when no reply comes; its context is the message before it, as for any message."""
    from agent.turn import ModelFailed

    prompt_submit(user=user, text="the weather in Lisbon", chat=CHAT)
    if ending == "tool round":
        model.queue_tool_call("canvas_add_card", {"id": "c", "title": "Porto"})
    if ending == "model failure":
        model.fail_next(500)
        with pytest.raises(ModelFailed):
            prompt_submit(user=user, text="and trains to Porto", chat=CHAT)
    else:
        prompt_submit(user=user, text="and trains to Porto", chat=CHAT)
    documents = _documents()
    messages = list(Message.objects.order_by("id"))
    assert set(documents) == {m.id for m in messages}
    before, prompt = messages[1], messages[2]
    assert prompt.content[0]["text"] == "and trains to Porto"
    assert documents[prompt.id] == _expected_document(prompt, before, documents)
    assert "porto" in documents[prompt.id][0] and documents[prompt.id][1]


def _session_of(user):
    from conversations.models import Session

    return Session.objects.get(user=user)


def test_a_prompt_its_dead_process_left_unindexed_is_indexed_by_the_next_turn(user, plain_turns):
    from conversations.models import Session
    from conversations.services import message_append
    from memory.search import search_history

    prompt_submit(user=user, text="the weather in Lisbon", chat=CHAT)
    session = _session_of(user)
    orphan = message_append(session=session, role="user", content="zanzibar ferries", index_later=True)
    assert orphan.id not in _documents()  # its process died before the turn's reply
    Session.objects.filter(pk=session.pk).update(turn_lease_id="", turn_lease_expires_at=None)  # the lease expired
    prompt_submit(user=user, text="anything else?", chat=CHAT)
    documents = _documents()
    assert set(documents) == set(Message.objects.values_list("id", flat=True))
    before = Message.objects.filter(id__lt=orphan.id).order_by("-id").first()
    assert documents[orphan.id] == _expected_document(orphan, before, documents)
    assert [hit.message_id for hit in search_history(session=session, query="zanzibar")][:1] == [orphan.id]


def test_a_failure_archiving_the_prompt_releases_the_lease(user, plain_turns, monkeypatch):
    """Without an Idempotency-Key the lease and the prompt are statements of their own, not one
    transaction: a failure after the lease was taken gives it back at once."""
    import agent.turn
    from agent.turn import turn_is_running

    title_from_prompt, failed = agent.turn.session_title_from_prompt, []

    def broken_once(**kwargs):
        if not failed:
            failed.append(True)
            raise RuntimeError("the title could not be written")
        title_from_prompt(**kwargs)

    monkeypatch.setattr(agent.turn, "session_title_from_prompt", broken_once)
    with pytest.raises(RuntimeError):
        prompt_submit(user=user, text="hello", chat=CHAT)
    assert not turn_is_running(session=_session_of(user))
    assert prompt_submit(user=user, text="hello again", chat=CHAT).reply == "Echo: hello again"


def test_the_turns_of_a_burst_queue_one_summary_job_at_its_start_and_one_at_its_end(
    user, plain_turns, settings, monkeypatch
):
    """While a summary is due, every turn finds it due: a burst of turns queues the job with its first
    turn, and once more when the span (conversations.bursts) has passed (for what the burst left due); a job
    that has run lets the next due turn queue one at once."""
    import agent.turn
    from agent.tasks import summary_update
    from conversations.models import Session

    settings.BUDDY_WINDOW_ROWS = 6
    monkeypatch.setattr(agent.turn.summary_bursts, "span", 4.0)
    queued: list[int] = []
    monkeypatch.setattr(agent.turn, "async_task", lambda name, session_id, **options: queued.append(session_id))
    due = []
    started = time.monotonic()
    for n in range(8):
        prompt_submit(user=user, text=f"turn {n}", chat=CHAT)
        due.append(summary_is_due(session=Session.objects.get()))
    first_due = due.index(True)
    assert len(due) - first_due >= 3 and all(due[first_due:])
    burst = time.monotonic() - started
    assert len(queued) == 1 + (burst >= 4.0)  # a loaded machine may take longer than the span
    _wait_until(lambda: len(queued) == 2)  # the span's end
    time.sleep(0.5)
    assert len(queued) == 2  # nothing more without a turn
    summary_update(queued[0])  # as a worker in this process would
    assert not summary_is_due(session=Session.objects.get())
    for n in range(8, 16):
        prompt_submit(user=user, text=f"turn {n}", chat=CHAT)
        if summary_is_due(session=Session.objects.get()):
            break
    assert len(queued) == 3  # due again after the job ran here: queued again at once


def _wait_until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_reply_goes_out_before_its_search_documents_are_written(user, plain_turns, monkeypatch):
    """Writing the search documents of the prompt and the reply (and the index behind them) does not
    hold up the `assistant_message` frame; they are written before the turn returns."""
    import agent.turn
    from memory.models import SearchDocument
    from realtime.frames import AssistantMessageFrame

    prompt_submit(user=user, text="the chat's first turn", chat=CHAT)
    first_turn = set(Message.objects.values_list("id", flat=True))
    documents_when_pushed = []
    push = agent.turn.push_frame

    def pushed(session, frame):
        if isinstance(frame, AssistantMessageFrame):
            documents_when_pushed.append(set(SearchDocument.objects.values_list("message_id", flat=True)))
        push(session, frame)

    monkeypatch.setattr(agent.turn, "push_frame", pushed)
    prompt_submit(user=user, text="and a second one", chat=CHAT)
    assert documents_when_pushed == [first_turn]
    assert set(SearchDocument.objects.values_list("message_id", flat=True)) == set(
        Message.objects.values_list("id", flat=True)
    )
    assert Message.objects.count() == 4
