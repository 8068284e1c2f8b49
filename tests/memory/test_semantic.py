"""Semantic search (memory.semantic): message vectors written in the background, questions answered
by meaning where they share no word with the answer, and the lexical ranking kept where words match."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client, override_settings

from conversations.models import Message
from conversations.services import message_append
from embeddings import encoder
from lib import threads
from memory import semantic
from memory.models import MessageVector, SearchDocument
from memory.search import search_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def semantic_on(settings):
    settings.BUDDY_SEMANTIC_SEARCH = "on"
    assert encoder.available(), encoder.INSTALL_HINT


def say(session, role: str, text: str) -> Message:
    return message_append(session=session, role=role, content=text)


def small_talk(session, count: int) -> None:
    lines = [
        "The weather was fine and the coffee was hot today.",
        "We walked the dog in the park again.",
        "Did you see the match last night? What a finish.",
        "I am baking bread this weekend, the sourdough finally works.",
        "Traffic on the bridge was terrible this morning.",
        "The tomatoes in the garden are almost ripe.",
    ]
    for index in range(count):
        say(session, "user" if index % 2 == 0 else "assistant", f"{lines[index % len(lines)]} ({index})")


def stored(message: Message) -> np.ndarray:
    return semantic.unpack([MessageVector.objects.get(message=message).vector])[0]


def boss_conversation(session) -> Message:
    small_talk(session, 20)
    say(session, "assistant", "So who do you report to now?")
    answer = say(session, "user", "Priya Raman, from the Berlin office. Seems nice so far.")
    small_talk(session, 20)
    return answer


# --- vectors -----------------------------------------------------------------------------------------


def test_each_message_gets_its_vector_plus_the_one_before_it(session, semantic_on):
    first = say(session, "user", "I need a new work laptop, help me choose.")
    second = say(session, "assistant", "The Dell XPS 13; better battery than the others you listed.")
    empty = say(session, "assistant", [{"type": "text", "text": "  "}])

    assert semantic.vectors_update(session.pk) == 3

    own_first, own_second = encoder.encode([first.search_document.text, second.search_document.text])
    # Stored in 8 bits: each component within half a step (max |x| / 63) of the vector.
    np.testing.assert_allclose(stored(first), own_first, atol=4e-3)
    np.testing.assert_allclose(stored(second), own_second + semantic.CONTEXT_WEIGHT * own_first, atol=4e-3)
    # An empty message has nothing of its own; it is still found by the message before it.
    np.testing.assert_allclose(stored(empty), semantic.CONTEXT_WEIGHT * own_second, atol=4e-3)


def test_the_vector_job_stops_at_a_message_not_indexed_yet(session, semantic_on, monkeypatch):
    """A message's text comes from its search document, which a turn writes once its reply is out
    (agent.turn): the job never encodes a message without it, and its indexing queues the next job."""
    from conversations.services import messages_index

    queued = []
    monkeypatch.setattr(semantic, "vectors_schedule", lambda session_id: queued.append(session_id))
    first = say(session, "user", "Which tent should I take to Iceland?")
    reply = message_append(session=session, role="assistant", content="A geodesic one, for the wind.", index_later=True)

    assert semantic.vectors_update(session.pk) == 1
    assert list(MessageVector.objects.values_list("message_id", flat=True)) == [first.id] and queued == []
    messages_index(messages=[reply])
    assert semantic.vectors_update(session.pk) == 1
    own_first, own_reply = encoder.encode([first.search_document.text, "A geodesic one, for the wind."])
    np.testing.assert_allclose(stored(reply), own_reply + semantic.CONTEXT_WEIGHT * own_first, atol=4e-3)


def test_vector_job_continues_where_it_stopped_and_is_safe_to_repeat(session, semantic_on, monkeypatch):
    small_talk(session, 7)
    complete = {}
    semantic.vectors_update(session.pk)
    for vector in MessageVector.objects.filter(session=session):
        complete[vector.message_id] = semantic.unpack([vector.vector])[0]
    MessageVector.objects.filter(session=session).delete()

    # A worker killed after its first batch: what it wrote stays, the next job starts after it.
    monkeypatch.setattr(semantic, "BATCH", 3)
    calls = []
    original = semantic._write

    def killed_after_one_batch(*args):
        if calls:
            raise SystemExit("worker killed")
        calls.append(1)
        original(*args)

    monkeypatch.setattr(semantic, "_write", killed_after_one_batch)
    with pytest.raises(SystemExit):
        semantic.vectors_update(session.pk)
    assert MessageVector.objects.filter(session=session).count() == 3
    monkeypatch.setattr(semantic, "_write", original)

    assert semantic.vectors_update(session.pk) == 4
    assert semantic.vectors_update(session.pk) == 0
    vectors = {vector.message_id: semantic.unpack([vector.vector])[0] for vector in MessageVector.objects.all()}
    assert vectors.keys() == complete.keys()
    for message_id, vector in complete.items():  # the same up to a step of the 8-bit codes
        np.testing.assert_allclose(vectors[message_id], vector, atol=1e-2)


def test_fill_writes_missing_vectors_anywhere_and_only_those(session, semantic_on):
    small_talk(session, 9)
    semantic.vectors_update(session.pk)
    before = {vector.message_id: semantic.unpack([vector.vector])[0] for vector in MessageVector.objects.all()}
    messages = list(Message.objects.filter(session=session).order_by("id"))
    gaps = [messages[0].id, messages[4].id, messages[5].id, messages[8].id]
    MessageVector.objects.filter(message_id__in=gaps).delete()

    assert semantic.vectors_fill(session.pk) == len(gaps)

    after = {vector.message_id: semantic.unpack([vector.vector])[0] for vector in MessageVector.objects.all()}
    assert after.keys() == before.keys()
    for message_id, vector in before.items():  # the same up to the batch's padding and a step of the codes
        np.testing.assert_allclose(after[message_id], vector, atol=1e-2)


def test_a_turn_queues_the_vector_job(session, semantic_on):
    from agent.turn import turn_run

    turn_run(session=session, text="Remind me to water the plants.")  # tasks run inline (BUDDY_TASKS_SYNC)

    archived = set(Message.objects.filter(session=session).values_list("id", flat=True))
    assert len(archived) >= 2
    assert set(MessageVector.objects.filter(session=session).values_list("message_id", flat=True)) == archived


def test_no_vectors_and_no_job_when_semantic_search_is_off(session, settings):
    settings.BUDDY_SEMANTIC_SEARCH = "off"
    say(session, "user", "Remind me to water the plants.")

    assert semantic.vectors_update(session.pk) == 0
    assert not MessageVector.objects.exists()


def test_embed_history_fills_an_archive(session, semantic_on):
    small_talk(session, 5)
    out = io.StringIO()

    call_command("embed_history", stdout=out)

    assert MessageVector.objects.filter(session=session).count() == 5
    assert "Wrote 5 vector(s)" in out.getvalue()


def test_embed_history_refuses_when_semantic_search_is_off(session, settings):
    settings.BUDDY_SEMANTIC_SEARCH = "off"
    with pytest.raises(CommandError, match="Semantic search is off"):
        call_command("embed_history")


# --- search ------------------------------------------------------------------------------------------


def test_finds_an_answer_that_shares_no_word_with_the_question(session, semantic_on, settings):
    answer = boss_conversation(session)
    semantic.vectors_update(session.pk)

    hits = search_history(session=session, query="Who is my new boss?", limit=3)
    assert answer.id in [hit.message_id for hit in hits]
    assert not any("[" in hit.snippet for hit in hits if hit.message_id == answer.id)

    settings.BUDDY_SEMANTIC_SEARCH = "off"
    assert answer.id not in [hit.message_id for hit in search_history(session=session, query="Who is my new boss?")]


def test_query_words_absent_from_the_archive_still_find_by_meaning(session, semantic_on):
    small_talk(session, 10)
    say(session, "user", "How do we get around Mallorca?")
    answer = say(session, "assistant", "I reserved one with Hertz, pickup at the airport.")
    small_talk(session, 10)
    semantic.vectors_update(session.pk)

    hits = search_history(session=session, query="Who did we rent the car from?", limit=3)

    assert hits[0].message_id == answer.id


def test_words_still_rank_first_when_they_match(session, semantic_on):
    one = say(session, "user", "The invoice for the roofing job arrived.")
    small_talk(session, 6)
    both = say(session, "user", "The roofing invoice from Kessler was wrong.")
    # Not right after `both`: a reply inherits the match of the message before it (its context), on
    # purpose, by words and by vector alike.
    small_talk(session, 2)
    say(session, "user", "Kessler called about something else.")
    semantic.vectors_update(session.pk)

    hits = search_history(session=session, query="Kessler roofing invoice", limit=5)

    assert hits[0].message_id == both.id
    assert one.id in [hit.message_id for hit in hits]
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))


def test_messages_without_vectors_are_found_by_words(session, semantic_on):
    small_talk(session, 6)
    late = say(session, "user", "The zeppelin exhibition opens on Friday.")  # its job has not run yet

    hits = search_history(session=session, query="zeppelin exhibition", limit=3)

    assert hits[0].message_id == late.id


def test_only_the_newest_window_is_scanned_by_vector(session, semantic_on, monkeypatch):
    answer = boss_conversation(session)
    semantic.vectors_update(session.pk)
    monkeypatch.setattr(semantic, "WINDOW", 10)

    hits = search_history(session=session, query="Who is my new boss?", limit=3)

    assert answer.id not in [hit.message_id for hit in hits]


def test_word_matches_older_than_the_window_are_ranked_by_their_vectors_too(session, semantic_on, monkeypatch):
    meant = say(session, "assistant", "For work, the Dell XPS 13 notebook: light, and the battery lasts all day.")
    small_talk(session, 3)
    plain = say(session, "user", "Work is busy.")
    small_talk(session, 10)
    semantic.vectors_update(session.pk)
    monkeypatch.setattr(semantic, "WINDOW", 5)  # both are older than the window

    hits = search_history(session=session, query="Which laptop for work?", limit=2)

    assert [hit.message_id for hit in hits] == [meant.id, plain.id]
    with override_settings(BUDDY_SEMANTIC_SEARCH="off"):  # by words alone the shorter one wins
        assert search_history(session=session, query="Which laptop for work?", limit=1)[0].message_id == plain.id


def test_a_cached_window_slides_to_the_newest_vectors(session, semantic_on, monkeypatch):
    monkeypatch.setattr(semantic, "WINDOW", 5)
    small_talk(session, 6)
    semantic.vectors_update(session.pk)
    first = semantic._window(session.pk)
    for index in range(3):
        say(session, "user", f"A new thought, number {index}, about the garden.")
    semantic.vectors_update(session.pk)

    window = semantic._window(session.pk)

    newest = list(MessageVector.objects.filter(session=session).order_by("-message_id")[:5])[::-1]
    assert first.size == 5 and window.ids.tolist() == [vector.message_id for vector in newest]
    assert window.codes.flags.c_contiguous and window.codes.shape == (encoder.DIMENSIONS, 5)
    expected = semantic.unpack([vector.vector for vector in newest]).T
    np.testing.assert_allclose(window.codes * window.scales, expected, atol=float(window.scales.max()))


def test_hostile_queries_with_semantic_search(client: Client, user, session, semantic_on):
    boss_conversation(session)
    semantic.vectors_update(session.pk)
    client.force_login(user)
    for query in ['"unclosed', "-(", "ünïcödé 🚀 名前", "x" * 10_000, "word " * 2000, "a b c"]:
        response = client.get("/memory/search", {"q": query, "chat_id": "main"})
        assert response.status_code == 200, query
        assert isinstance(response.json()["results"], list)


def test_search_is_scoped_to_one_session_by_vector_too(session, user, other_user, semantic_on):
    from conversations.services import session_get_or_create

    boss_conversation(session)
    semantic.vectors_update(session.pk)
    other = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    say(other, "user", "Hello there.")
    semantic.vectors_update(other.pk)

    hits = search_history(session=other, query="Who is my new boss?", limit=10)

    assert {hit.message_id for hit in hits} <= set(Message.objects.filter(session=other).values_list("id", flat=True))


def test_system_checks_refuse_a_missing_model_and_a_mistyped_mode(settings, monkeypatch):
    from memory.checks import semantic_search_check

    settings.BUDDY_SEMANTIC_SEARCH = "on"
    assert semantic_search_check(None) == []
    monkeypatch.setattr(encoder, "available", lambda: False)
    assert [error.id for error in semantic_search_check(None)] == ["memory.E002"]
    settings.BUDDY_SEMANTIC_SEARCH = "auto"
    assert semantic_search_check(None) == []
    assert not semantic.enabled()
    settings.BUDDY_SEMANTIC_SEARCH = "yes"
    assert [error.id for error in semantic_search_check(None)] == ["memory.E001"]


def test_the_cached_window_follows_new_filled_and_deleted_vectors(session, semantic_on, monkeypatch):
    monkeypatch.setattr(semantic, "CHECK_SECONDS", 0)  # checked whole at every search
    small_talk(session, 12)
    semantic.vectors_update(session.pk)
    query = "Who is my new boss?"
    search_history(session=session, query=query, limit=3)  # the window is cached now

    say(session, "assistant", "So who do you report to now?")
    answer = say(session, "user", "Priya Raman, from the Berlin office. Seems nice so far.")
    semantic.vectors_update(session.pk)
    assert answer.id in [hit.message_id for hit in search_history(session=session, query=query, limit=3)]

    # An older vector written after the window was cached (embed_history filling a gap).
    older = Message.objects.filter(session=session).order_by("id")[5]
    SearchDocument.objects.filter(pk=older.pk).update(text="My manager is Priya now, she runs the Berlin office.")
    MessageVector.objects.filter(message=older).delete()
    search_history(session=session, query=query, limit=3)
    semantic.vectors_fill(session.pk)
    assert older.id in [hit.message_id for hit in search_history(session=session, query=query, limit=3)]

    # A deleted message leaves the results at once.
    answer.delete()
    hits = search_history(session=session, query=query, limit=3)
    assert answer.id not in [hit.message_id for hit in hits]
    assert older.id in [hit.message_id for hit in hits]


def test_cached_windows_are_bounded_per_process(user, agent, semantic_on, monkeypatch):
    from conversations.services import session_get_or_create

    monkeypatch.setattr(semantic, "CACHED_VECTORS", 8)
    sessions = [session_get_or_create(user=user, agent_slug="buddy", chat_id=f"chat-{n}") for n in range(3)]
    for session in sessions:
        small_talk(session, 4)
        semantic.vectors_update(session.pk)
        search_history(session=session, query="coffee and bread", limit=3)

    assert list(semantic._windows) == [sessions[1].pk, sessions[2].pk]
    # The count kept beside the cache is its vectors', also when a chat's window is replaced.
    small_talk(sessions[1], 1)
    semantic.vectors_update(sessions[1].pk)
    search_history(session=sessions[1], query="coffee and bread", limit=3)
    assert list(semantic._windows) == [sessions[1].pk]
    assert semantic._windows_vectors == semantic._windows[sessions[1].pk].size == 5


def test_import_history_queues_the_vectors_of_what_it_imported(tmp_path, user, agent, semantic_on):
    import json

    lines = [
        {"role": "user", "content": "I need a new work laptop, help me choose."},
        {"role": "assistant", "content": "The ThinkPad X1 Carbon; better battery and lighter."},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = io.StringIO()

    call_command("import_history", str(path), "--user", "alice", stdout=out, stderr=io.StringIO())

    imported = Message.objects.filter(session__user=user)
    assert imported.count() == 2
    assert MessageVector.objects.filter(message__in=imported).count() == 2  # tasks run inline in the tests
    assert "Search covers them in full" in out.getvalue()


def test_import_history_says_how_long_indexing_will_take(tmp_path, user, agent, semantic_on, monkeypatch):
    import json

    monkeypatch.setattr(semantic, "vectors_schedule", lambda *, session_id: None)  # workers busy elsewhere
    path = tmp_path / "chat.jsonl"
    lines = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Line {i} of a long chat."} for i in range(40)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = io.StringIO()

    call_command("import_history", str(path), "--user", "alice", stdout=out, stderr=io.StringIO())

    said = out.getvalue()
    assert "vectors of 40 message(s): about " in said and " s on this machine" in said
    assert "Search finds them by their words now" in said


def test_the_cached_window_is_checked_whole_only_now_and_then(session, semantic_on, monkeypatch):
    small_talk(session, 12)
    older = Message.objects.filter(session=session).order_by("id")[5]
    SearchDocument.objects.filter(pk=older.pk).update(text="My manager is Priya now, she runs the Berlin office.")
    semantic.vectors_update(session.pk)
    MessageVector.objects.filter(message=older).delete()  # a job that never ran for it
    query = "Who is my new boss?"
    search_history(session=session, query=query, limit=3)  # cached without it
    semantic.vectors_fill(session.pk)

    assert older.id not in [hit.message_id for hit in search_history(session=session, query=query, limit=3)]
    monkeypatch.setattr(semantic, "CHECK_SECONDS", 0)
    assert search_history(session=session, query=query, limit=1)[0].message_id == older.id


def test_a_forked_process_encodes_on_a_pool_of_its_own(semantic_on, monkeypatch):
    first = semantic.query_vector("Who is my new boss?").result(timeout=30)
    inherited = semantic._pool()
    monkeypatch.setattr(threads.os, "getpid", lambda: -1)  # as in a worker forked after a search

    second = semantic.query_vector("Who is my new boss?").result(timeout=30)

    assert semantic._pool() is not inherited
    np.testing.assert_allclose(first, second, atol=1e-6)
    semantic._pool().shutdown()


def test_warm_up_builds_what_the_first_search_would_wait_for(semantic_on, settings, monkeypatch, caplog):
    from embeddings import quantized

    model = encoder._model()
    monkeypatch.setattr(model, "_quantized", encoder._UNBUILT)
    monkeypatch.setattr(quantized, "_sessions", {})

    semantic.warm_up().result(timeout=60)

    assert model._quantized is not encoder._UNBUILT and model._quantized is not None
    assert "scanner" in quantized._sessions
    settings.BUDDY_SEMANTIC_SEARCH = "off"
    assert semantic.warm_up() is None

    settings.BUDDY_SEMANTIC_SEARCH = "on"
    monkeypatch.setattr(encoder, "encode_query", lambda text: 1 / 0)
    semantic.warm_up().result(timeout=60)  # a failure is logged, not raised on the pool
    assert "could not warm up" in caplog.text


def test_one_vector_job_per_session_at_a_time(session, semantic_on):
    from datetime import timedelta

    from django.utils import timezone

    from memory.models import VectorLease

    small_talk(session, 3)
    VectorLease.objects.create(session=session, expires_at=timezone.now() + timedelta(minutes=1))
    assert semantic.vectors_update(session.pk) == 0  # another job holds it
    assert not MessageVector.objects.exists()

    VectorLease.objects.filter(session=session).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert semantic.vectors_update(session.pk) == 3  # that job was killed: its lease ran out
    assert not VectorLease.objects.exists()


def test_a_message_arriving_as_a_job_ends_gets_a_job_of_its_own(session, semantic_on, monkeypatch):
    small_talk(session, 3)
    release = semantic._lease_release
    late = []

    def release_after_a_message_came(session_id):
        if not late:  # committed after the job's last batch, while it held the lease
            late.append(say(session, "user", "One more thing about the garden."))
        release(session_id)

    monkeypatch.setattr(semantic, "_lease_release", release_after_a_message_came)
    semantic.vectors_update(session.pk)  # the follow-up job runs inline in the tests

    assert MessageVector.objects.filter(message=late[0]).exists()
    assert MessageVector.objects.filter(session=session).count() == 4


def test_a_chat_is_indexed_whole_from_its_first_message(session, other_user, semantic_on, monkeypatch):
    """The background job covers the whole archive (an import too), oldest first, in jobs of at most
    JOB_SECONDS that queue the next; the chat's count of indexed messages follows."""
    from conversations.services import session_get_or_create

    other = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    for index in range(12):  # two chats at once: their ids interleave
        say(session, "user", f"Our garden plan, part {index}: tomatoes along the south fence.")
        say(other, "user", f"Unrelated: the printer jammed again ({index}).")
    queued = []
    monkeypatch.setattr(semantic, "JOB_SECONDS", 0)  # one batch per job
    monkeypatch.setattr(semantic, "BATCH", 5)
    monkeypatch.setattr(semantic, "vectors_schedule", lambda *, session_id: queued.append(session_id))

    assert semantic.vectors_update(session.pk) == 5
    mine = list(Message.objects.filter(session=session).order_by("id"))
    assert set(MessageVector.objects.values_list("message_id", flat=True)) == {m.id for m in mine[:5]}
    assert queued == [session.pk]  # the rest goes on in the next job
    assert semantic.index_progress(session_id=session.pk, messages=12) == (12, 5)
    assert semantic.vectors_update(session.pk) + semantic.vectors_update(session.pk) == 7
    assert semantic.index_progress(session_id=session.pk, messages=12) == (12, 12)
    # A vector's context is the message before it in this chat, not the id before it.
    own_sixth, own_fifth = encoder.encode([mine[5].search_document.text, mine[4].search_document.text])
    np.testing.assert_allclose(stored(mine[5]), own_sixth + semantic.CONTEXT_WEIGHT * own_fifth, atol=2e-3)


def test_a_broken_model_costs_the_meaning_not_the_search(session, semantic_on, monkeypatch, caplog):
    late = say(session, "user", "The zeppelin exhibition opens on Friday.")
    semantic.vectors_update(session.pk)

    def broken():
        raise RuntimeError("model.safetensors is truncated")

    monkeypatch.setattr(encoder, "_model", broken)
    hits = search_history(session=session, query="zeppelin exhibition", limit=3)

    assert [hit.message_id for hit in hits] == [late.id]
    assert "semantic search failed" in caplog.text


def test_a_failing_window_query_costs_the_meaning_not_the_callers_transaction(session, semantic_on, monkeypatch):
    late = say(session, "user", "The zeppelin exhibition opens on Friday.")
    semantic.vectors_update(session.pk)
    monkeypatch.setitem(semantic._QUERIES, "window", ("memory_no_such_function", "SELECT no_such_column FROM x"))
    assert connection.in_atomic_block  # the test's transaction, as a caller's would be

    hits = search_history(session=session, query="zeppelin exhibition", limit=3)

    assert [hit.message_id for hit in hits] == [late.id]
    assert Message.objects.filter(session=session).count() == 1  # the transaction still works


def test_the_8_bit_encoder_failing_at_run_time_falls_back_to_float32(semantic_on, monkeypatch, caplog):
    model = encoder._model()
    layers = model.quantized()
    assert layers is not None

    def broken(hidden, key_bias):
        raise RuntimeError("onnxruntime: bad allocation")

    monkeypatch.setattr(layers, "run", broken)
    monkeypatch.setattr(model, "_quantized", layers)

    vector = encoder.encode_query("What did we decide about pricing?")

    np.testing.assert_array_equal(vector, encoder.encode(["What did we decide about pricing?"])[0])
    assert model._quantized is None
    encoder.encode_query("again")
    assert caplog.text.count("8-bit query encoder failed") == 1


def test_a_search_waits_for_its_semantic_side_only_so_long(session, semantic_on, monkeypatch, caplog):
    import time

    late = say(session, "user", "The zeppelin exhibition opens on Friday.")
    semantic.vectors_update(session.pk)
    encode_query = encoder.encode_query

    def slow(text):
        time.sleep(1.0)
        return encode_query(text)

    monkeypatch.setattr(encoder, "encode_query", slow)
    monkeypatch.setattr(semantic, "RESULT_SECONDS", 0.05)
    started = time.monotonic()

    hits = search_history(session=session, query="zeppelin exhibition", limit=3)

    assert time.monotonic() - started < 0.9
    assert [hit.message_id for hit in hits] == [late.id]
    assert "semantic search failed" in caplog.text


def test_a_question_about_something_never_said_finds_nothing(session, semantic_on):
    small_talk(session, 12)
    semantic.vectors_update(session.pk)

    for question in ("How much did the plumber charge?", "quantum chromodynamics lattice simulations"):
        assert search_history(session=session, query=question, limit=5) == []


def test_a_search_reads_the_window_only_when_vectors_were_written(session, semantic_on, monkeypatch):
    """The chat's vector count, read with its statistics, tells whether any vector was written since
    the window was cached: while it is the same, a search sends no query for the window at all."""
    monkeypatch.setattr(semantic, "CHECK_SECONDS", 3600)  # no check of the whole window in this test
    small_talk(session, 6)
    semantic.vectors_update(session.pk)
    queries = []
    real_query = semantic._query
    monkeypatch.setattr(semantic, "_query", lambda name, *args: queries.append(name) or real_query(name, *args))
    query = "Who is my new boss?"

    search_history(session=session, query=query, limit=3)
    search_history(session=session, query=query, limit=3)
    assert queries == ["whole"]

    say(session, "assistant", "So who do you report to now?")
    answer = say(session, "user", "Priya Raman, from the Berlin office. Seems nice so far.")
    semantic.vectors_update(session.pk)
    hits = search_history(session=session, query=query, limit=3)
    assert queries == ["whole", "after"]
    assert answer.id in [hit.message_id for hit in hits]
    assert answer.id in semantic._windows[session.pk].ids


def test_a_chat_longer_than_the_window_reads_its_newest_vectors(session, semantic_on, monkeypatch):
    monkeypatch.setattr(semantic, "WINDOW", 5)
    small_talk(session, 8)
    semantic.vectors_update(session.pk)
    queries = []
    real_query = semantic._query
    monkeypatch.setattr(semantic, "_query", lambda name, *args: queries.append(name) or real_query(name, *args))

    search_history(session=session, query="coffee and bread", limit=3)

    newest = list(MessageVector.objects.filter(session=session).order_by("-message_id")[:5])
    assert queries == ["window"]
    assert semantic._windows[session.pk].ids.tolist() == sorted(vector.message_id for vector in newest)


@pytest.mark.django_db(transaction=True)  # on PostgreSQL the migration ends with VACUUM FULL
def test_migration_0012_stores_float16_vectors_in_eight_bits_and_back(transactional_db, session):
    """memory 0012 on vectors written as float16: each becomes what `pack` writes for its values, one
    already in 8 bits is left alone, and a second run changes nothing; backwards gives float16 again."""
    import importlib

    migration = importlib.import_module("memory.migrations.0012_vectors_in_eight_bits")
    messages = [say(session, "user", f"Message number {index} about the harbour.") for index in range(4)]
    values = np.random.default_rng(9).standard_normal((4, encoder.DIMENSIONS)).astype(np.float16) / 8
    MessageVector.objects.bulk_create(
        MessageVector(message=message, session=session, vector=vector.tobytes())
        for message, vector in zip(messages[:3], values[:3], strict=True)
    )
    MessageVector.objects.create(message=messages[3], session=session, vector=semantic.pack(values[3]))

    def blobs() -> list[bytes]:
        return [bytes(vector.vector) for vector in MessageVector.objects.order_by("message_id")]

    with connection.schema_editor(atomic=False) as editor:  # as migrate runs it
        migration.forwards(None, editor)
    eight_bits = blobs()
    assert eight_bits == [semantic.pack(value.astype(np.float32)) for value in values]
    with connection.schema_editor(atomic=False) as editor:  # as migrate runs it
        migration.forwards(None, editor)
    assert blobs() == eight_bits

    with connection.schema_editor(atomic=False) as editor:  # as migrate runs it
        migration.backwards(None, editor)
    restored = np.frombuffer(b"".join(blobs()), dtype=np.float16).reshape(4, encoder.DIMENSIONS)
    np.testing.assert_allclose(restored, values, atol=float(np.abs(values).max()) / 63)


def test_the_question_is_encoded_without_the_speakers_the_chat_has_now(session, semantic_on, monkeypatch):
    """The encoding starts before the chat's statistics are read, with the speakers its last search
    saw; when the statistics show other speakers, the question is encoded again without their names,
    and that is the vector the search uses."""
    from memory import search

    for index in range(6):
        say(session, "user", f"Caroline: I went to the support group, week {index}.")
        say(session, "assistant", f"Melanie: That sounds good, tell me about week {index}.")
    semantic.vectors_update(session.pk)
    encoded = []
    real_encode = encoder.encode_query
    monkeypatch.setattr(encoder, "encode_query", lambda text: encoded.append(text) or real_encode(text))
    scanned = []
    real_scan = semantic._scan
    monkeypatch.setattr(semantic, "_scan", lambda window, vector: scanned.append(vector) or real_scan(window, vector))
    query = "What did Caroline say about the support group?"

    search._speakers_seen(session.pk, set())  # what a search saw before the transcript was imported
    search_history(session=session, query=query, limit=3)
    assert encoded == [query, "What did say about the support group?"]
    np.testing.assert_array_equal(scanned[-1], real_encode("What did say about the support group?"))

    encoded.clear()
    search_history(session=session, query=query, limit=3)  # the speakers it saw are still the chat's
    assert encoded == ["What did say about the support group?"]


def test_the_encoder_reads_its_model_directory_from_the_setting(settings, tmp_path):
    """memory/apps.py points the plain encoder at BUDDY_EMBEDDING_MODEL, read on every use."""
    bundled = encoder.model_dir()
    settings.BUDDY_EMBEDDING_MODEL = str(tmp_path)
    assert encoder.model_dir() == tmp_path and not encoder.available()
    settings.BUDDY_EMBEDDING_MODEL = ""
    assert encoder.model_dir() == bundled
