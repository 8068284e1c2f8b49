"""History search (memory.search) and GET /memory/search. Runs on SQLite, and on PostgreSQL when
DATABASE_URL points there: every assertion holds on both backends."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client

import memory.search as search
from conversations.models import Message
from conversations.services import message_append, message_build, messages_bulk_append, session_get_or_create
from memory.models import SearchDocument
from memory.search import search_history
from textsearch import ranking
from textsearch.text import index_prefix, index_terms, query_terms, snippet

pytestmark = pytest.mark.django_db


def say(session, role: str, text: str) -> Message:
    return message_append(session=session, role=role, content=text)


def ids(hits) -> list[int]:
    return [hit.message_id for hit in hits]


def filler(session, count: int, text: str = "The weather was fine and the coffee was hot today.") -> None:
    for index in range(count):
        say(session, "user" if index % 2 == 0 else "assistant", f"{text} Note {index}.")


# --- ranking ---------------------------------------------------------------------------------------


def test_rarer_term_outranks_common_term(session):
    filler(session, 12, "We walked the dog in the park again.")
    rare = say(session, "user", "The zeppelin exhibition opens on Friday.")
    common = say(session, "user", "The park was crowded with dogs.")

    hits = search_history(session=session, query="zeppelin park", limit=20)

    assert hits[0].message_id == rare.id
    assert ids(hits).index(rare.id) < ids(hits).index(common.id)
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))


def test_more_matched_terms_win(session):
    one = say(session, "user", "The invoice for the roofing job arrived.")
    filler(session, 6)
    both = say(session, "user", "The roofing invoice from Kessler was wrong.")
    say(session, "user", "Kessler called about something else.")

    hits = search_history(session=session, query="Kessler roofing invoice", limit=5)

    assert hits[0].message_id == both.id
    assert one.id in ids(hits)


def test_stemming_relates_decided_decision_and_deciding(session):
    decision = say(session, "user", "The board's decision on the merger is final.")
    deciding = say(session, "assistant", "Deciding this took three meetings.")
    decided = say(session, "user", "They decided in March.")
    say(session, "user", "Nothing relevant here at all.")

    for query in ("What was decided?", "the decision", "deciding"):
        found = set(ids(search_history(session=session, query=query, limit=10)))
        assert {decision.id, deciding.id, decided.id} <= found, query


def test_question_words_and_stop_words_do_not_match(session):
    say(session, "user", "What did you say about that? Do you remember?")
    target = say(session, "user", "Our pricing goes up in June.")

    hits = search_history(session=session, query="What did we say about pricing?", limit=5)

    assert ids(hits) == [target.id]


def test_reply_is_found_through_the_question_it_answers(session):
    question = say(session, "user", "Which airline did we book for the Lisbon trip?")
    answer = say(session, "assistant", "TAP, the 9:40 departure. The confirmation is in your inbox.")
    filler(session, 6)

    hits = search_history(session=session, query="What airline are we flying to Lisbon with?", limit=5)

    # The message that names the topic ranks first, the reply that holds the answer right after it.
    assert ids(hits)[:2] == [question.id, answer.id]


def test_reply_after_tool_round_trips_keeps_the_prompt_as_context(session):
    say(session, "user", "Show me the dentist appointment details on the canvas.")
    say(
        session,
        "assistant",
        [{"type": "tool_use", "id": "tu_1", "name": "canvas_add_card", "input": {"id": "c1", "title": "C"}}],
    )
    say(session, "user", [{"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}])
    final = say(session, "assistant", "It is with Dr. Okafor on Tuesday at 3pm.")

    assert "dentist" in final.search_document.context.split()
    assert final.id in ids(search_history(session=session, query="when is my dentist appointment", limit=5))


def test_bulk_append_chains_context_like_message_append(session):
    say(session, "user", "Where should the offsite be held?")
    built = [
        message_build(session=session, role="assistant", content="Porto, in the old customs house."),
        message_build(session=session, role="user", content="Book the venue then."),
    ]
    messages_bulk_append(messages=built)
    reply, follow_up = Message.objects.filter(session=session).order_by("id")[1:3]

    assert "offsit" in reply.search_document.context.split()
    assert "porto" in follow_up.search_document.context.split()
    assert reply.id in ids(search_history(session=session, query="offsite location", limit=5))


# --- snippets --------------------------------------------------------------------------------------


def test_snippet_marks_matches_in_brackets(session):
    say(session, "user", "Honestly, I think the quarterly budget review went badly for everyone.")

    (hit,) = search_history(session=session, query="budget reviews", limit=5)

    assert "[budget]" in hit.snippet and "[review]" in hit.snippet
    assert hit.snippet.count("[") == hit.snippet.count("]") == 2


def test_snippet_of_long_text_is_a_window_around_the_matches():
    text = " ".join(["lorem ipsum dolor"] * 200) + " the treasure map is hidden " + " sit amet" * 200

    result = snippet(text, query_terms("treasure map"))

    assert "[treasure] [map]" in result
    assert result.startswith("…") and result.endswith("…")
    assert len(result) <= 260


def test_snippet_quotes_literal_brackets_as_they_are_escaped_apart_from_its_marks():
    result = snippet("Answer [confirmation c1: confirmed] for the gala", query_terms("gala"))
    assert result == "Answer \\[confirmation c1: confirmed\\] for the [gala]"

    result = snippet("[confirmation deploy: confirmed] C:\\temp", query_terms("deploy"))
    assert result == "\\[confirmation [deploy]: confirmed\\] C:\\\\temp"


def test_a_long_snippet_never_ends_inside_an_escape_or_a_match():
    for filler in range(200, 260):
        text = "x" * filler + " [[[[ deploy " + "[" * 300
        result = snippet(text, query_terms("deploy"), window=400)
        body = result.removesuffix("…")
        unescaped = body.replace("\\\\", "").replace("\\[", "").replace("\\]", "")
        assert "\\" not in unescaped and unescaped.count("[") == unescaped.count("]") <= 1


def test_indexed_text_is_what_a_person_reads_not_json(session):
    message = say(
        session,
        "assistant",
        [
            {"type": "text", "text": "Here is the chart."},
            {"type": "tool_use", "id": "t1", "name": "canvas_show_chart", "input": {"title": "Rainfall"}},
        ],
    )
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]}]
    say(session, "user", result)

    assert "rainfal" in message.search_document.terms.split()
    assert not {"type", "tool_use", "input", "id"} & set(message.search_document.terms.split())
    assert search_history(session=session, query="type input", limit=5) == []
    assert ids(search_history(session=session, query="rainfall chart", limit=5))[0] == message.id


# --- scoping and bounds ----------------------------------------------------------------------------


def test_search_is_scoped_to_one_session(session, user, other_user):
    mine = say(session, "user", "The password hint is pelican.")
    other_chat = session_get_or_create(user=user, agent_slug="buddy", chat_id="work")
    say(other_chat, "user", "Pelican crossing on Main Street.")
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    say(theirs, "user", "A pelican stole my sandwich.")

    assert ids(search_history(session=session, query="pelican", limit=50)) == [mine.id]
    assert search_history(session=other_chat, query="password hint", limit=50) == []


def test_limit_is_respected(session):
    filler(session, 30, "Apples and pears at the market.")

    assert len(search_history(session=session, query="apples", limit=7)) == 7


def test_common_term_cap_keeps_old_messages_with_a_rarer_term(session, monkeypatch):
    """A term in more messages than the cap contributes only its newest matches as candidates, but an
    old message holding a rarer query term is still found and scored with both terms."""
    monkeypatch.setattr(search, "CANDIDATES_PER_TERM", 5)
    rival = say(session, "user", "Zoo notes: the giraffe project budget moved to Friday.")
    say(session, "assistant", "Noted.")
    old = say(session, "user", "Meeting notes: the giraffe project meeting moved to Monday.")
    filler(session, 40, "Another meeting about the schedule.")

    hits = search_history(session=session, query="giraffe meeting", limit=5)

    # Both are older than the capped term's newest matches: only "meeting", counted in the old
    # message's score, puts it above its rival.
    assert [hit.message_id for hit in hits[:2]] == [old.id, rival.id]


def test_a_common_term_brings_about_the_cap_of_its_newest_matches(session, monkeypatch):
    """A capped term brings about CANDIDATES_PER_TERM of its newest matches, counting the messages
    that hold it only in their context (the replies to those that name it): not twice as many."""
    from memory.search import postgres as postgres_backend
    from memory.search import sqlite as sqlite_backend

    monkeypatch.setattr(search, "CANDIDATES_PER_TERM", 10)
    for index in range(60):
        say(session, "user", f"Another meeting about item {index}.")
        say(session, "assistant", f"Noted {index}.")
    brought: list[int] = []
    for backend in (postgres_backend, sqlite_backend):

        def counted(*, real=backend.candidates, **arguments):
            rows = real(**arguments)
            brought.append(len(rows))
            return rows

        monkeypatch.setattr(backend, "candidates", counted)

    search_history(session=session, query="meeting", limit=5)

    # 120 messages match (60 in their text, 60 replies in their context); without counting the
    # context the bound would let in about 20.
    assert brought and 5 <= brought[0] <= 14


def test_deleting_a_session_removes_its_statistics(session):
    say(session, "user", "Remember the alpaca farm.")
    session_id = session.pk
    session.delete()

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_search_term WHERE session_id = %s", [session_id])
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM memory_search_session WHERE session_id = %s", [session_id])
        assert cursor.fetchone()[0] == 0


def test_index_follows_updates_and_deletes(session):
    """The triggers keep the index (FTS5 table, PostgreSQL side table) and the statistics in step with
    every write: an update re-indexes the row, a delete removes it."""
    kept = say(session, "user", "The walrus sanctuary is open in winter.")
    changed = say(session, "assistant", "Tickets for the walrus sanctuary cost nine euros.")

    terms = index_terms("Tickets for the pelican colony cost nine euros.")
    SearchDocument.objects.filter(pk=changed.pk).update(terms=" ".join(terms))

    assert ids(search_history(session=session, query="pelican colony", limit=5)) == [changed.id]
    # "walrus" is left only in its context (the prompt before it): the other message now ranks first
    assert ids(search_history(session=session, query="walrus", limit=5)) == [kept.id, changed.id]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT df FROM memory_search_term WHERE session_id = %s AND term = %s",
            [session.pk, *index_terms("walrus")],
        )
        assert cursor.fetchone()[0] == 1
    Message.objects.filter(pk=changed.pk).delete()
    assert search_history(session=session, query="pelican colony", limit=5) == []
    assert ids(search_history(session=session, query="walrus", limit=5)) == [kept.id]
    with connection.cursor() as cursor:
        cursor.execute("SELECT messages FROM memory_search_session WHERE session_id = %s", [session.pk])
        assert cursor.fetchone()[0] == 1


@pytest.mark.postgres
def _postgres_term_lists(session_id: int, term: str) -> tuple[list[int], list[int], int, int]:
    """The ids of a term's plain and blocked postings in the PostgreSQL index, with its plain_last and
    last_id statistics."""
    lexeme = index_prefix(session_id) + term
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, x.lexeme FROM memory_message_search, unnest(tsvector_to_array(vector)) AS x(lexeme)"
            " WHERE x.lexeme = %s OR x.lexeme LIKE %s ORDER BY id",
            [lexeme, lexeme + "\\_%"],
        )
        postings = cursor.fetchall()
        cursor.execute(
            "SELECT plain_last, last_id FROM memory_search_term WHERE session_id = %s AND term = %s",
            [session_id, term],
        )
        plain_last, last_id = cursor.fetchone()
    plain = [message_id for message_id, found in postings if found == lexeme]
    blocked = [message_id for message_id, found in postings if found != lexeme]
    return plain, blocked, plain_last, last_id


def _assert_postgres_lists_bounded(session_id: int, term: str) -> None:
    """What lookups rely on: every plain posting at most plain_last, every blocked one past it, in the
    block of its id."""
    from memory.search import postgres

    plain, blocked, plain_last, last_id = _postgres_term_lists(session_id, term)
    assert all(message_id <= plain_last for message_id in plain)
    assert all(plain_last < message_id <= last_id for message_id in blocked)
    with connection.cursor() as cursor:
        for message_id in blocked:
            cursor.execute(
                "SELECT vector @@ %s::tsquery FROM memory_message_search WHERE id = %s",
                [f"'{index_prefix(session_id)}{term}_{message_id >> postgres.BLOCK_BITS}'", message_id],
            )
            assert cursor.fetchone()[0]


def test_messages_indexed_twice_keep_one_document_and_count_once(session):
    """A turn's reply is indexed after it is out, and the next message's indexer takes along any message
    it finds without documents: both may write the same messages' documents. The second write changes
    nothing, and the index statistics count each message once."""
    from conversations.services import message_append, messages_index

    prompt = message_append(session=session, role="user", content="Where do the puffins nest?", index_later=True)
    reply = message_append(session=session, role="assistant", content="On the cliffs of Mykines.", index_later=True)
    messages_index(messages=[prompt, reply])
    with connection.cursor() as cursor:
        cursor.execute("SELECT df FROM memory_search_term WHERE session_id = %s AND term = %s", [session.pk, "puffin"])
        df = cursor.fetchone()[0]
    messages_index(messages=[prompt, reply])  # again, as a second indexer would
    assert SearchDocument.objects.filter(session=session).count() == 2
    assert ids(search_history(session=session, query="puffins", limit=5)) == [prompt.id, reply.id]
    with connection.cursor() as cursor:
        cursor.execute("SELECT messages FROM memory_search_session WHERE session_id = %s", [session.pk])
        assert cursor.fetchone()[0] == 2
        cursor.execute("SELECT df FROM memory_search_term WHERE session_id = %s AND term = %s", [session.pk, "puffin"])
        assert cursor.fetchone()[0] == df == 1


@pytest.mark.postgres
def test_postgres_common_terms_are_indexed_in_blocks_and_looked_up_whole(session):
    """On PostgreSQL a term's postings go into id blocks once it is common in the session; a lookup,
    bounded or not, still returns exactly the messages holding the term (own text or context), and a
    lookup bounded past the plain list does not read it."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    from memory.search import Lookup, postgres

    ferry = index_terms("ferry")[0]
    plain = postgres.COMMON_DF + 10
    messages_bulk_append(  # plain postings: the term is not common yet when these statements run
        messages=[
            message_build(session=session, role="user", content=f"The ferry left at {index}.") for index in range(plain)
        ],
        batch_size=postgres.COMMON_DF - 5,
    )
    with connection.cursor() as cursor:  # the next messages land in later blocks of ids
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('conversations_message', 'id'), %s)",
            [(Message.objects.latest("id").id >> postgres.BLOCK_BITS) + 2 << postgres.BLOCK_BITS],
        )
    later = [say(session, "assistant", f"The ferry was late again, by {index} minutes.") for index in range(3)]

    everything = list(SearchDocument.objects.filter(session=session).order_by("message_id"))
    holding = [d.message_id for d in everything if ferry in (d.terms + " " + d.context).split()]
    assert len(holding) == plain + len(later)
    plain_ids, blocked_ids, plain_last, last_id = _postgres_term_lists(session.pk, ferry)
    assert plain_ids == holding[:plain]  # each posting once, in one list or the other
    assert blocked_ids == [m.id for m in later]  # common by then: the plain list stopped growing
    assert (plain_last, last_id) == (holding[plain - 1], later[-1].id)
    _assert_postgres_lists_bounded(session.pk, ferry)

    for min_id in (0, holding[postgres.COMMON_DF // 2], later[0].id):
        found = postgres.candidates(
            session_id=session.pk,
            lookups=[Lookup(term=ferry, min_id=min_id, weight=1.0, index_stats=(plain_last, last_id))],
            first_id=everything[0].message_id,
            max_id=everything[-1].message_id,
            limit=10_000,
        )
        assert sorted(row[0] for row in found) == [message_id for message_id in holding if message_id >= min_id]
    prefix = index_prefix(session.pk) + ferry
    assert f"'{prefix}'" not in postgres._tsquery(session.pk, ferry, later[0].id, later[-1].id, plain_last, last_id)
    assert postgres._tsquery(session.pk, ferry, holding[0], plain_last, plain_last, plain_last) == f"'{prefix}'"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_concurrent_appends_keep_plain_and_blocked_lists_apart(session):
    """Writers appending the same term around the moment it becomes common, each in its own
    transaction: the term's statistics still bound its plain and blocked postings exactly (the term row
    is locked before the lists are chosen), so no lookup misses a message."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    import threading

    from memory.search import Lookup, postgres

    kayak = index_terms("kayak")[0]
    messages_bulk_append(
        messages=[
            message_build(session=session, role="user", content=f"The kayak trip, day {index}.")
            for index in range(postgres.COMMON_DF - 6)
        ]
    )
    barrier = threading.Barrier(4)

    def writer(number: int) -> None:
        from django.db import connections

        try:
            barrier.wait()
            for index in range(4):
                say(session, "user", f"Writer {number} booked kayak number {index}.")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    plain_ids, blocked_ids, plain_last, last_id = _postgres_term_lists(session.pk, kayak)
    assert len(plain_ids) + len(blocked_ids) == postgres.COMMON_DF - 6 + 16
    assert blocked_ids  # it became common on the way
    _assert_postgres_lists_bounded(session.pk, kayak)
    written = list(
        Message.objects.filter(session=session, search_document__text__startswith="Writer").values_list("id", flat=True)
    )
    found = postgres.candidates(
        session_id=session.pk,
        lookups=[Lookup(term=kayak, min_id=min(written), weight=1.0, index_stats=(plain_last, last_id))],
        first_id=min(plain_ids),
        max_id=last_id,
        limit=1_000,
    )
    assert sorted(row[0] for row in found) == sorted(written)


@pytest.mark.postgres
def test_postgres_index_has_no_pending_list():
    """Every lookup would scan GIN's pending list of not-yet-merged postings: the index writes directly."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_message_search_vector'")
        assert "fastupdate=off" in cursor.fetchone()[0]


@pytest.mark.postgres
@pytest.mark.parametrize("semantic_search", ["off", "on"])
def test_postgres_lookup_settings_do_not_leak_into_the_callers_transaction(session, settings, semantic_search):
    """The lookups turn scans, JIT and parallel workers off for their own queries only (the word
    lookup, and semantic search's window), also inside a transaction of the caller's (as every test
    here runs), and also when a query fails."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    from memory import semantic

    settings.BUDDY_SEMANTIC_SEARCH = semantic_search
    names = ["enable_seqscan", "enable_indexscan", "enable_bitmapscan", "jit", "max_parallel_workers_per_gather"]

    def current() -> tuple:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(['current_setting(%s)'] * len(names))}", names)
            return cursor.fetchone()

    say(session, "user", "The harbour master retires in May.")
    semantic.vectors_update(session.pk)
    assert connection.in_atomic_block
    before = current()
    assert before[:3] == ("on", "on", "on")

    assert search_history(session=session, query="harbour master", limit=5)
    assert current() == before
    for query, arguments in (("window", (5,)), ("after", (0, 5)), ("count", (0,))):  # the window's functions
        rows = semantic._query(query, session.pk, *arguments)
        assert bool(rows) == (semantic_search == "on" or query == "count")
        assert current() == before

    with connection.cursor() as cursor:  # the word lookup carries its settings itself
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'memory_search_candidates'")
        assert set(cursor.fetchone()[0]) == {"jit=off", "max_parallel_workers_per_gather=0", "enable_seqscan=off"}
    with pytest.raises(DatabaseError) as failed, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(  # a tsquery that does not parse: the lookup fails inside its function
            "SELECT memory_search_candidates(%s::text[], %s::float8[], %s::bigint[], %s, %s)",
            [["'harbour' &"], [1.0], [0], 10, 5],
        )
    assert failed.value.__cause__.sqlstate == "42601"  # a syntax error, not a missing function
    assert current() == before


HOSTILE_QUERIES = [
    "",
    "   ",
    "the and of what did we",
    '"',
    '"unbalanced quote',
    "'; DROP TABLE conversations_message; --",
    "-pelican",
    "pelican -",
    "((pelican",
    "pelican)",
    "NEAR(pelican sandwich)",
    "pelican AND OR NOT",
    "terms:pelican",
    "pel*",
    "^pelican",
    "{pelican}",
    "pelican\\",
    "pelican\x00sandwich",
    "pélican çafé naïve",
    "ペリカン 鵜鶘 пеликан",
    "🦩🦩🦩",
    "a" * 5000,
    "pelican " * 1500,
    " ".join(f"word{index}" for index in range(2000)),
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_queries_are_answered(session, query):
    say(session, "user", "A pelican stole my sandwich; ペリカン.")

    hits = search_history(session=session, query=query, limit=5)

    assert isinstance(hits, list)
    if "pelican" in query.lower() and "pelican" in query_terms(query):
        assert hits


def test_query_with_nothing_left_after_stop_words_finds_nothing(session):
    say(session, "user", "What did we do and why?")

    assert query_terms("what did we do and why") == []
    assert search_history(session=session, query="what did we do and why", limit=5) == []


def test_terms_are_safe_for_both_index_formats():
    terms = index_terms("Ünïcödé l'été 'quoted' \"double\" back\\slash under_score 日本語 x" * 3)

    assert terms
    assert all(term and not set(term) & set(" '\"\\_:") for term in terms)


# --- the endpoint ----------------------------------------------------------------------------------


@pytest.fixture
def client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_endpoint_returns_results_best_first(client, session):
    target = say(session, "user", "The wifi password is 'correct horse'.")
    say(session, "assistant", "Noted.")

    response = client.get("/memory/search", {"q": "wifi password"})

    assert response.status_code == 200
    results = response.json()["results"]
    assert results[0]["id"] == target.id
    assert set(results[0]) == {"id", "role", "created_at", "snippet", "score"}
    assert "[wifi] [password]" in results[0]["snippet"]
    assert results[0]["role"] == "user"


def test_endpoint_explicit_chat_and_agent(client, user):
    work = session_get_or_create(user=user, agent_slug="buddy", chat_id="work.2024:q1")
    target = say(work, "user", "Quarterly targets are ambitious.")

    response = client.get("/memory/search", {"q": "targets", "chat_id": "work.2024:q1", "agent": "buddy"})

    assert response.status_code == 200
    assert [result["id"] for result in response.json()["results"]] == [target.id]


@pytest.mark.parametrize("query", HOSTILE_QUERIES[:-3] + ["x" * 10_000], ids=range(len(HOSTILE_QUERIES) - 2))
def test_endpoint_answers_hostile_queries(client, session, query):
    say(session, "user", "A pelican stole my sandwich.")

    response = client.get("/memory/search", {"q": query})

    if query == "":  # no query at all is invalid input
        assert response.status_code == 422
        return
    assert response.status_code == 200
    assert isinstance(response.json()["results"], list)


def test_endpoint_requires_authentication(session):
    response = Client().get("/memory/search", {"q": "anything"})

    assert response.status_code == 401
    assert "detail" in response.json()


def test_endpoint_unknown_chat_is_404_and_creates_nothing(client, session):
    response = client.get("/memory/search", {"q": "x", "chat_id": "nope"})

    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "No such chat."}
    assert not session.user.buddy_sessions.filter(chat_id="nope").exists()


def test_endpoint_other_users_chat_is_404(client, other_user):
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="secret")
    say(theirs, "user", "The vault code is 1234.")

    response = client.get("/memory/search", {"q": "vault code", "chat_id": "secret"})

    assert response.status_code == 404
    assert "detail" in response.json()


def test_endpoint_unknown_agent_is_404(client, session):
    assert client.get("/memory/search", {"q": "x", "agent": "nobody"}).status_code == 404


@pytest.mark.parametrize("limit", ["0", "51", "-1", "abc", "1.5"])
def test_endpoint_limit_out_of_range_is_422(client, session, limit):
    response = client.get("/memory/search", {"q": "x", "limit": limit})

    assert response.status_code == 422
    assert "detail" in response.json()


@pytest.mark.parametrize("chat_id", ["has space", "x" * 65, "semi;colon"])
def test_endpoint_invalid_chat_id_is_422(client, session, chat_id):
    assert client.get("/memory/search", {"q": "x", "chat_id": chat_id}).status_code == 422


def test_endpoint_limit_bounds_are_accepted(client, session):
    filler(session, 60, "Bananas are yellow.")

    assert len(client.get("/memory/search", {"q": "bananas", "limit": "50"}).json()["results"]) == 50
    assert len(client.get("/memory/search", {"q": "bananas", "limit": "1"}).json()["results"]) == 1


def test_results_after_the_first_five_skip_near_copies_of_those_above(session, monkeypatch):
    """Below the best DIVERSE_AFTER, a message that repeats the words of a result above gives its slot to
    one that says something else (docs/search.md); with no redundancy penalty the copies stay."""
    filler(session, 20)
    for detail in ("painted the door red", "fixed the lamp", "counted the ships", "fed the gulls", "wrote the log"):
        say(session, "user", f"The lighthouse keeper {detail}.")
    copies = [
        say(session, "assistant", "The lighthouse keeper painted the door red, the door red again."),
        say(session, "assistant", "So the lighthouse keeper painted the door red, the red door."),
    ]
    other = say(session, "user", "The old lighthouse on the cliff stood empty for a century.")

    diverse = search_history(session=session, query="lighthouse keeper", limit=6)
    monkeypatch.setattr(ranking, "REDUNDANCY_PENALTY", 0.0)
    by_score = ids(search_history(session=session, query="lighthouse keeper", limit=6))

    assert by_score[5] in {copy.id for copy in copies}
    assert ids(diverse)[:5] == by_score[:5]
    assert ids(diverse)[5] == other.id
    assert all(a.score >= b.score for a, b in zip(diverse, diverse[1:], strict=False))
