"""Search across all of a user's chats (README: `GET /search`; docs/search.md, "Across chats")."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from pydantic import ValidationError

from conversations.models import Agent, Message, Session
from conversations.services import message_append, session_get_or_create
from memory.schemas import AllChatsSearchIn
from memory.search import across
from memory.search.across import search_all_chats
from memory.tools import memory_tool_run
from textsearch.ranking import idf

pytestmark = pytest.mark.django_db


def chat(user, chat_id: str, *texts: str, agent: str = "buddy", title: str = "") -> Session:
    session = session_get_or_create(user=user, agent_slug=agent, chat_id=chat_id)
    if title:
        Session.objects.filter(pk=session.pk).update(title=title)
    for index, text in enumerate(texts):
        message_append(session=session, role="user" if index % 2 == 0 else "assistant", content=text)
    return session


@pytest.fixture
def helper_agent(db):
    return Agent.objects.create(slug="helper", name="Helper", avatar="H")


@pytest.fixture
def chats(user, agent, helper_agent):
    trips = chat(
        user,
        "trips",
        "We should book the ferry to Naxos for June.",
        "The ferry leaves Piraeus at seven.",
        "Pack the snorkel.",
        title="Greek trip",
    )
    house = chat(
        user,
        "house",
        "The plumber comes on Tuesday.",
        "Ask him about the boiler too.",
        "Paint is beige.",
        title="House",
    )
    work = chat(
        user, "work", "The quarterly report is due Friday.", "Priya reviews it.", agent="helper", title="Work stuff"
    )
    return trips, house, work


def test_finds_messages_in_every_chat_of_every_agent_best_first(api, chats):
    trips, house, work = chats
    body = api.get("/search", {"q": "ferry to Naxos"}).json()
    first = body["results"][0]
    assert first["id"] == trips.messages.order_by("id").first().id
    assert {key: first[key] for key in ("agent", "chat_id", "chat_title", "role")} == {
        "agent": "buddy",
        "chat_id": "trips",
        "chat_title": "Greek trip",
        "role": "user",
    }
    assert first["snippet"].startswith("We should book the [ferry] to [Naxos]")
    assert set(first) == {"id", "agent", "chat_id", "chat_title", "role", "created_at", "snippet", "score"}
    scores = [result["score"] for result in body["results"]]
    assert scores == sorted(scores, reverse=True)

    found = {(r["chat_id"], r["agent"]) for r in api.get("/search", {"q": "plumber report"}).json()["results"]}
    assert found == {("house", "buddy"), ("work", "helper")}


def test_agent_narrows_the_search_to_that_agents_chats(api, chats):
    assert [r["chat_id"] for r in api.get("/search", {"q": "quarterly report", "agent": "helper"}).json()["results"]]
    assert api.get("/search", {"q": "quarterly report", "agent": "buddy"}).json()["results"] == []
    assert api.get("/search", {"q": "quarterly report", "agent": ""}).json()["results"]  # empty: every agent


def test_never_anything_of_another_user(api, user, other_user, chats):
    theirs = chat(other_user, "secret", "The vault combination is pelican seven.", title="Bob's secrets")
    mine = chat(user, "birds", "A pelican landed on the pier.")
    results = api.get("/search", {"q": "pelican vault combination", "limit": 50}).json()["results"]
    assert [r["id"] for r in results] == [mine.messages.get().id]
    assert "Bob" not in str(results)
    # Their own search finds theirs, and only theirs.
    assert [hit.chat_id for hit in search_all_chats(user=other_user, query="pelican")] == [theirs.chat_id]


def test_the_models_search_still_sees_only_its_own_chat(user, chats):
    trips, house, _ = chats
    # The person's search finds the plumber in the house chat...
    assert {hit.chat_id for hit in search_all_chats(user=user, query="plumber")} == {"house"}
    # ...the model's tool in the trips chat does not, and finds its own chat's ferry.
    assert memory_tool_run(session=trips, name="search_history", tool_input={"query": "plumber"}).startswith(
        "No messages match"
    )
    assert "[ferry]" in memory_tool_run(session=trips, name="search_history", tool_input={"query": "ferry"})
    assert "[plumber]" in memory_tool_run(session=house, name="search_history", tool_input={"query": "plumber"})


def test_a_rare_word_across_chats_picks_its_chat_when_only_some_are_searched(user, monkeypatch):
    monkeypatch.setattr(across, "CHATS_SEARCHED", 1)
    for number in range(6):
        chat(user, f"c{number}", "We talked about the garden today.", "Tomatoes and the garden again.")
    target = chat(user, "odd", "The garden gnome is called Archibald.")
    hits = search_all_chats(user=user, query="garden gnome Archibald")
    assert hits and {hit.chat_id for hit in hits} == {target.chat_id}


def test_the_choice_weighs_every_word_a_chat_holds_and_breaks_ties_by_the_newest(user, monkeypatch):
    monkeypatch.setattr(across, "CHATS_SEARCHED", 2)
    for number in range(4):
        chat(user, f"g{number}", "The garden again.", "Garden garden.", "More garden.")
    both = chat(user, "both", "The garden gnome is called Archibald.")
    gnomes = chat(user, "gnomes", "A gnome figure sat on the wall.")  # newer than "both"
    choice = across.chats_chosen(user_id=user.pk, agent_id=None, terms=["garden", "gnome"], spans=[])
    assert [c.chat_id for c in choice.chats] == [both.chat_id, gnomes.chat_id]
    assert choice.scores[both.pk] > choice.scores[gnomes.pk]
    # "garden" alone: the four garden chats tie with "both"; the newest two are chosen.
    alone = across.chats_chosen(user_id=user.pk, agent_id=None, terms=["garden"], spans=[])
    assert [c.chat_id for c in alone.chats] == ["both", "g3"]


def test_the_choice_reads_only_the_users_chats_of_the_agent(user, other_user, helper_agent):
    mine = chat(user, "mine", "The quokka photo.", agent="helper")
    chat(user, "buddy-chat", "Another quokka photo.")
    chat(other_user, "theirs", "Quokka quokka quokka.", agent="helper")
    helper = across.chats_chosen(user_id=user.pk, agent_id=helper_agent.pk, terms=["quokka"], spans=[])
    assert [c.session_id for c in helper.chats] == [mine.pk]
    every = across.chats_chosen(user_id=user.pk, agent_id=None, terms=["quokka"], spans=[])
    assert {c.chat_id for c in every.chats} == {"mine", "buddy-chat"}


def test_the_question_is_encoded_once_for_the_chats_whose_speakers_it_does_not_name(user, settings, monkeypatch):
    from embeddings import encoder
    from memory import semantic

    settings.BUDDY_SEMANTIC_SEARCH = "on"
    chats = [
        chat(
            user,
            "pets",
            "Caroline: My dog chewed the sofa.",
            "Melanie: Dogs will be dogs.",
            "Caroline: The dog got a new bed.",
            "Melanie: Lucky dog.",
        ),
        chat(user, "walks", "Jon: The dog walk was long.", "Gina: Dogs love the park."),
        chat(user, "vet", "The vet said the dog is fine."),
    ]
    for session in chats:
        semantic.vectors_update(session.pk)
    encoded: list[str] = []
    encode_query = encoder.encode_query
    monkeypatch.setattr(encoder, "encode_query", lambda text: encoded.append(text) or encode_query(text))

    hits = search_all_chats(user=user, query="What did the dog do?")
    assert {hit.chat_id for hit in hits} == {"pets", "walks", "vet"}
    assert encoded == ["What did the dog do?"]

    encoded.clear()  # a name one chat's speakers hold: that chat encodes the question without it
    search_all_chats(user=user, query="What did Caroline say about the dog?")
    assert sorted(encoded) == ["What did Caroline say about the dog?", "What did say about the dog?"]


def test_a_day_named_brings_in_the_chat_of_that_day(user, monkeypatch):
    monkeypatch.setattr(across, "CHATS_SEARCHED", 1)
    for number in range(3):
        chat(user, f"c{number}", "Lunch was soup.")
    dated = session_get_or_create(user=user, agent_slug="buddy", chat_id="dated")
    said = message_append(session=dated, role="user", content="Dinner was fish.")
    Session.objects.filter(pk=dated.pk)  # created_at is set by the archive; move the message to that day
    type(said).objects.filter(pk=said.pk).update(created_at=datetime(2023, 10, 13, 12, tzinfo=UTC))
    hits = search_all_chats(user=user, query="What did I eat on October 13, 2023?")
    assert [hit.message_id for hit in hits][:1] == [said.id]


DAY = (datetime(2023, 10, 13, tzinfo=UTC), datetime(2023, 10, 14, tzinfo=UTC))
OTHER_DAY = (datetime(2023, 11, 2, tzinfo=UTC), datetime(2023, 11, 3, tzinfo=UTC))
MONTH = (datetime(2023, 10, 1, tzinfo=UTC), datetime(2023, 11, 1, tzinfo=UTC))


def dated_chat(user, chat_id: str, text: str, *, day: datetime | None = None, agent: str = "buddy") -> Session:
    session = chat(user, chat_id, text, "Noted.", agent=agent)
    if day is not None:
        Message.objects.filter(session=session).update(created_at=day.replace(hour=12))
    return session


def chosen_by_scoring_every_chat(user, agent_id, terms, spans) -> tuple[list[int], dict[int, float], list[int], bool]:
    """The choice worked out for every chat of the user, one at a time: the chosen chats, their scores,
    the best CHATS_SEARCHED by summed weight alone, and whether the first chat left out ties the last
    chosen (the newest chosen first)."""
    frequencies, messages = across._user_statistics(user.pk, terms)
    weights = {term: idf(df, messages) ** 2 for term, df in frequencies.items()}
    bonus = across.DATE_CHAT_BONUS * max([1.0, *weights.values()])
    chats = Session.objects.filter(user=user, **({"agent_id": agent_id} if agent_id else {}))
    weighed, scores, newest = {}, {}, {}
    for session in chats:
        with connection.cursor() as cursor:
            cursor.execute("SELECT term FROM memory_search_term WHERE session_id = %s AND df > 0", [session.pk])
            held = sorted(term for (term,) in cursor.fetchall() if term in weights)
        weighed[session.pk] = round(sum(weights[term] for term in held), 9)
        dated = any(session.messages.filter(created_at__gte=start, created_at__lt=end).exists() for start, end in spans)
        scores[session.pk] = weighed[session.pk] + (bonus if dated else 0.0)
        newest[session.pk] = session.messages.order_by("-id").values_list("id", flat=True).first()

    def ranked(score_of: dict[int, float]) -> list[int]:
        return sorted((pk for pk in score_of if score_of[pk] > 0), key=lambda pk: (-score_of[pk], -newest[pk]))

    count = across.CHATS_SEARCHED
    best = ranked(scores)
    tie_at_the_cut = len(best) > count and scores[best[count - 1]] == scores[best[count]]
    return best[:count], {pk: scores[pk] for pk in best[:count]}, ranked(weighed)[:count], tie_at_the_cut


def test_a_dated_question_chooses_as_if_every_chat_were_scored(user, other_user, helper_agent, monkeypatch):
    """Only the best chats by weight and the best dated chats are read, and the choice is that of
    scoring every chat: with dated chats far below the best by weight, ties at every level (the newest
    first), dated chats that hold none of the words, another agent's and another user's chats."""
    for number in range(4):  # the best by weight, never dated
        dated_chat(user, f"strong-{number}", "The garden gnome is called Archibald.")
    for number in range(4):  # in the middle, every other one dated (on one day or the other)
        day = (DAY, OTHER_DAY)[number % 4 // 2][0] if number % 2 else None
        dated_chat(user, f"middle-{number}", "A garden gnome again.", day=day)
    for number in range(6):  # the weakest, some dated
        dated_chat(user, f"weak-{number}", "The garden.", day=DAY[0] if number in {1, 2, 4} else None)
    for number in range(3):  # none of the words, dated
        dated_chat(user, f"lunch-{number}", "Lunch was soup.", day=(DAY, OTHER_DAY)[number % 2][0])
    dated_chat(user, "helper-garden", "The garden gnome.", day=DAY[0], agent="helper")
    dated_chat(other_user, "theirs", "Garden gnome Archibald garden.", day=DAY[0])
    questions = [["garden"], ["gnome"], ["garden", "gnome", "archibald"], ["archibald"], [], ["xylophone"]]
    outside = tied = 0
    for chats_searched in (1, 3, 5):
        monkeypatch.setattr(across, "CHATS_SEARCHED", chats_searched)
        for agent_id in (None, helper_agent.pk, Agent.objects.get(slug="buddy").pk):
            for spans in ([DAY], [OTHER_DAY], [DAY, OTHER_DAY], [MONTH], [OTHER_DAY, MONTH]):
                for terms in questions:
                    expected, scores, by_weight, tie = chosen_by_scoring_every_chat(user, agent_id, terms, spans)
                    choice = across.chats_chosen(user_id=user.pk, agent_id=agent_id, terms=terms, spans=spans)
                    if not expected:  # nothing scores: the newest chats, as without a day
                        expected = [c.session_id for c in across._newest_chats(user.pk, agent_id)]
                        scores = dict.fromkeys(expected, 0.0)
                    assert [c.session_id for c in choice.chats] == expected, (chats_searched, agent_id, spans, terms)
                    assert {c.session_id: choice.scores[c.session_id] for c in choice.chats} == pytest.approx(scores)
                    outside += bool(set(expected) - set(by_weight))
                    tied += tie
    # The data set does put dated chats below the best by weight, and ties at the cut, in most cases.
    assert outside > 100 and tied > 100, (outside, tied)


def test_a_question_no_chat_has_a_word_of_finds_nothing_without_meaning(user, chats):
    assert search_all_chats(user=user, query="xylophone quintessence") == []
    assert search_all_chats(user=user, query="the of and what") == []  # no terms, no date


def test_limit_is_respected_across_chats(api, user):
    for number in range(4):
        chat(user, f"c{number}", *[f"apples number {index}" for index in range(10)])
    assert len(api.get("/search", {"q": "apples", "limit": 3}).json()["results"]) == 3
    assert len(api.get("/search", {"q": "apples"}).json()["results"]) == 20


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({}, "q"),
        ({"q": "x" * 1001}, "q"),
        ({"q": "pelican\x00"}, "q"),
        ({"q": "x", "limit": 0}, "limit"),
        ({"q": "x", "limit": 51}, "limit"),
        ({"q": "x", "limit": "many"}, "limit"),
        ({"q": "x", "agent": "no spaces"}, "agent"),
        ({"q": "x", "agent": "x\x00y"}, "agent"),
    ],
)
def test_bad_input_is_422_with_the_error_body(api, chats, params, field):
    response = api.get("/search", params)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] in {"invalid_field", "invalid_text", "invalid_agent"}
    assert body["detail"]
    assert [error["field"] for error in body["errors"]] == [field]


def test_text_that_is_not_valid_unicode_is_refused_or_replaced_never_a_500(api, chats):
    # A lone surrogate cannot be sent in a URL: its UTF-8-like bytes arrive, and Django decodes a query
    # string's bytes that are not UTF-8 as U+FFFD, which is text like any other.
    for raw in ("pelican%ED%A0%80", "%FF%FE", "%C0%AF"):
        assert api.get(f"/search?q={raw}").status_code == 200
    # Decoded text holding one (another transport, a future Django) is the same 422 as a prompt's.
    with pytest.raises(ValidationError, match="q"):
        AllChatsSearchIn(q="pelican\ud800")


def test_an_unknown_agent_is_404_like_everywhere(api, chats):
    response = api.get("/search", {"q": "ferry", "agent": "nobody"})
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_any_valid_text_is_a_question(api, chats):
    for query in ("ferry " * 160, "☃ 🐍 ферри", "'; DROP TABLE x; --", '"ferry" OR *', "ferry\u202e"):
        assert api.get("/search", {"q": query}).status_code == 200


def test_needs_authentication(client, chats):
    assert client.get("/search", {"q": "ferry"}).status_code == 401


def test_the_chat_a_question_is_about_gains_over_one_that_shares_a_word(user, monkeypatch):
    about = chat(
        user,
        "art",
        *[
            line
            for day in range(6)
            for line in (
                f"Caroline: I painted the harbour again, study number {day}.",
                f"Melanie: Your paint colours get better every time, {day}!",
            )
        ],
        "Caroline: Today I painted a lake at dawn.",
        "Melanie: The lake painting is lovely.",
    )
    chat(user, "shop", "Jon: The paint shop on the corner closed.", "Gina: Shame.", "Jon: Lunch now.", "Gina: Fine.")

    def first_chat() -> str:
        return search_all_chats(user=user, query="What did Caroline paint?")[0].chat_id

    assert first_chat() == about.chat_id
    hits = search_all_chats(user=user, query="What did Caroline paint?")
    art = [hit.score for hit in hits if hit.chat_id == "art"]
    shop = [hit.score for hit in hits if hit.chat_id == "shop"]
    # Every hit of the chat the question is about gains the two chat terms over the other chat's.
    monkeypatch.setattr(across, "CHAT_SHARE_WEIGHT", 0.0)
    monkeypatch.setattr(across, "CHAT_SPEAKER_BOOST", 0.0)
    plain = search_all_chats(user=user, query="What did Caroline paint?")
    assert max(art) - max(hit.score for hit in plain if hit.chat_id == "art") == pytest.approx(
        across.SPEAKER_BOOST + 20.0, abs=1e-3
    )
    shop_share = max(shop) - max(hit.score for hit in plain if hit.chat_id == "shop")
    assert 0 < shop_share < 20.0  # "paint" only: a share of the art chat's weight


@pytest.mark.django_db(transaction=True)
def test_later_chats_are_searched_on_threads_of_their_own_with_the_same_results(user, monkeypatch):
    """Outside a transaction the chats after the first are searched on the chat-search threads, each on
    its own connection (given back after each search); the hits are those of searching them one by one."""
    for number in range(5):
        chat(user, f"garden-{number}", f"The garden gnome number {number}.", "Tomatoes in the garden.")
    threads: list[str] = []
    searched = across._search_on_thread

    def recorded(session, **kwargs):
        threads.append(threading.current_thread().name)
        return searched(session, **kwargs)

    monkeypatch.setattr(across, "_search_on_thread", recorded)
    parallel = search_all_chats(user=user, query="garden gnome tomatoes")
    assert len(threads) == across.CHATS_SEARCHED - 1
    assert all(name.startswith("chat-search") for name in threads)
    with transaction.atomic():  # inside a transaction: one after the other, on this connection
        serial = search_all_chats(user=user, query="garden gnome tomatoes")
    assert len(threads) == across.CHATS_SEARCHED - 1
    assert len({hit.chat_id for hit in parallel}) == across.CHATS_SEARCHED
    assert parallel == serial


@pytest.mark.django_db(transaction=True)
def test_a_failing_chat_search_on_a_thread_fails_the_search(user, monkeypatch):
    for number in range(3):
        chat(user, f"garden-{number}", "The garden gnome.")

    def broken(session, **kwargs):
        raise RuntimeError("the chat's search broke")

    monkeypatch.setattr(across, "_search_on_thread", broken)
    with pytest.raises(RuntimeError, match="search broke"):
        search_all_chats(user=user, query="garden gnome")
