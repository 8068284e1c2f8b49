"""What a question says besides its words (textsearch.cues): who said it, and when; what surrounds a
message (the message after it, the rest of its day); and a chat still being indexed ranked as well as
words rank it. On SQLite, and on PostgreSQL when DATABASE_URL says so."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conversations.models import Message
from conversations.services import message_append
from embeddings import encoder
from memory import semantic
from memory.models import MessageVector
from memory.search import search_history
from textsearch import cues
from textsearch.speakers import without_label

pytestmark = pytest.mark.django_db


def say(session, role: str, text: str, created_at: datetime | None = None) -> Message:
    return message_append(session=session, role=role, content=text, created_at=created_at)


def ids(hits) -> list[int]:
    return [hit.message_id for hit in hits]


# --- the cues, read from text ---------------------------------------------------------------------


def test_speaker_labels_and_the_chat_speakers():
    assert cues.speaker_label("Caroline: I went to a support group.") == "caroline"
    assert cues.speaker_label("Mary Ann Lee: hi") == "mary ann lee"
    assert cues.speaker_label("Note: buy milk") == "note"
    assert cues.speaker_label("the plan: a, b") is None  # not capitalised: not a name
    assert without_label("Caroline: I went there.") == "I went there."
    starts = ["Caroline: hi", "Melanie: hello", "Caroline: so", "Melanie: yes", "Note: once", "plain text"]
    assert cues.speakers(starts) == {"caroline", "melanie"}


def test_a_question_names_one_speaker_or_none():
    chat = {"caroline", "melanie"}
    assert cues.named_speaker("What did Caroline research?", chat) == "caroline"
    assert cues.named_speaker("What is Caroline's identity?", chat) == "caroline"
    assert cues.named_speaker("When did Caroline and Melanie meet?", chat) is None
    assert cues.named_speaker("What did we decide?", chat) is None
    assert cues.without_names("What is Caroline's identity?", chat) == "What is identity?"


def test_dates_a_question_names():
    day = (datetime(2023, 10, 13, tzinfo=UTC), datetime(2023, 10, 14, tzinfo=UTC))
    assert cues.date_spans("What painting did Melanie show on October 13, 2023?") == [day]
    assert cues.date_spans("on 13 October 2023") == [day]
    assert cues.date_spans("on the 13th of Oct. 2023") == [day]
    assert cues.date_spans("the 2023-10-13 release") == [day]
    assert cues.date_spans("in December 2023") == [
        (datetime(2023, 12, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC))
    ]
    # Impossible or unrepresentable dates name nothing; they are never an error.
    for text in ("February 30, 2026", "on 2026-13-01", "December 9999", "May 0000", "in May"):
        assert cues.date_spans(text) == []


# --- the cues in a search -------------------------------------------------------------------------


def test_a_question_naming_a_speaker_ranks_that_speakers_words_first(session):
    for index in range(10):
        say(session, "user", f"Caroline: the weather is fine today ({index}).")
        say(session, "assistant", f"Melanie: the kids are at school ({index}).")
    hers = say(session, "assistant", "Melanie: I painted a lake at sunrise last week.")
    mine = say(session, "user", "Caroline: I painted a lake at sunrise too, a small one.")

    # The words match both alike: the speaker the question names decides.
    assert ids(search_history(session=session, query="What did Melanie paint?", limit=1)) == [hers.id]
    assert ids(search_history(session=session, query="What did Caroline paint?", limit=1)) == [mine.id]
    assert set(ids(search_history(session=session, query="Who painted a lake?", limit=2))) == {hers.id, mine.id}


def test_a_question_naming_a_day_finds_what_was_said_that_day(session):
    october = datetime(2023, 10, 13, 14, 0, tzinfo=UTC)
    for day in (1, 2, 3):
        september = datetime(2023, 9, day, tzinfo=UTC)
        say(session, "user", f"Tim: I showed my new guitar to the band ({day}).", created_at=september)
        say(session, "assistant", f"John: Show me the drawings you made ({day}).", created_at=september)
    said = say(session, "assistant", "John: Look at this, I finished it.", created_at=october)
    reply = say(session, "user", "Tim: Great colours!", created_at=october)
    say(session, "user", "Tim: my guitar lessons start soon.", created_at=datetime(2023, 11, 2, tzinfo=UTC))

    # No word of the question is in the message of that day: the date brings it.
    hits = search_history(session=session, query="What did John show on October 13, 2023?", limit=1)
    assert ids(hits) == [said.id]
    # A date alone is a question too.
    assert set(ids(search_history(session=session, query="October 13, 2023", limit=5))) == {said.id, reply.id}


def test_the_best_words_of_its_day_lift_a_message(session, monkeypatch):
    from memory import search

    first, second = datetime(2023, 5, 1, 10, tzinfo=UTC), datetime(2023, 5, 8, 10, tzinfo=UTC)
    say(session, "user", "Ann: The concert at the stadium was amazing.", created_at=first)
    say(session, "user", "Ann: Anyway.", created_at=first)
    that_day = say(session, "user", "Ann: The band played until midnight.", created_at=first)
    say(session, "user", "Ann: We had pasta for dinner.", created_at=second)
    say(session, "user", "Ann: Anyway.", created_at=second)
    other_day = say(session, "user", "Ann: The band played until midnight.", created_at=second)
    for index in range(20):
        say(session, "user", f"Ann: The weather was fine ({index}).", created_at=second)
    query = "How long did the band play at the stadium concert?"

    def scores() -> dict[int, float]:
        return {hit.message_id: hit.score for hit in search_history(session=session, query=query, limit=10)}

    # The same words, after the same message: alike but for their day, one about the concert.
    monkeypatch.setattr(search, "DAY_WORDS_WEIGHT", 0.0)
    alike = scores()
    assert alike[that_day.id] == alike[other_day.id]
    monkeypatch.setattr(search, "DAY_WORDS_WEIGHT", 0.5)
    lifted = scores()
    assert lifted[that_day.id] > lifted[other_day.id]


# --- a chat still being indexed -------------------------------------------------------------------


@pytest.fixture
def semantic_on(settings):
    settings.BUDDY_SEMANTIC_SEARCH = "on"
    assert encoder.available(), encoder.INSTALL_HINT


def test_a_chat_half_indexed_ranks_what_waits_for_its_vector_as_words_do(session, semantic_on):
    """Before, a chat half indexed scanned the vectors it had, and ranked the messages still waiting
    for theirs below: the answer, written last, fell out of the results."""
    for index in range(40):
        say(session, "user", f"The weather was fine and the coffee was hot today ({index}).")
    answer = say(session, "user", "The plumber fixes the boiler on Tuesday morning.")
    say(session, "assistant", "Noted, Tuesday morning for the boiler.")
    semantic.vectors_fill(session.pk)
    MessageVector.objects.filter(message_id__gte=answer.id - 5).delete()  # the job has not reached them
    semantic.index_count(session_id=session.pk, added=-6)
    for index in range(40):  # written after: waiting for their vectors too
        say(session, "user", f"The bread was fresh and the tea was strong ({index}).")
    messages = Message.objects.filter(session=session).count()
    total, indexed = semantic.index_progress(session_id=session.pk, messages=messages)
    assert not semantic.ready(messages=total, indexed=indexed)

    with_meaning = ids(search_history(session=session, query="When is the plumber coming?", limit=3))
    with semantic_off(session):
        by_words = ids(search_history(session=session, query="When is the plumber coming?", limit=3))

    assert by_words[0] == answer.id
    assert with_meaning[0] == answer.id


def semantic_off(session):
    from django.test import override_settings

    return override_settings(BUDDY_SEMANTIC_SEARCH="off")


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "being-indexed"])
def test_a_message_whose_reply_answers_the_question_ranks_higher(session, semantic_on, monkeypatch, indexed):
    """Two messages alike in words and in the message before them; the reply to one of them answers
    the question in other words. Indexed, the reply's similarity comes from the scan; still being
    indexed, from the re-ranking, which encodes the replies on the spot."""
    from memory import search

    for index in range(30):
        say(session, "user", f"Tom: The train was late again this morning ({index}).")
    say(session, "user", "Tom: Anyway.")
    adopted = say(session, "user", "Tom: Guess what happened this weekend!")
    say(session, "assistant", "Ann: You brought a puppy home from the animal shelter?")
    say(session, "user", "Tom: Anyway.")
    fished = say(session, "user", "Tom: Guess what happened this weekend!")
    say(session, "assistant", "Ann: You caught three trout at the lake?")
    for index in range(30):
        say(session, "user", f"Tom: The printer jammed at work ({index}).")
    if indexed:
        semantic.vectors_fill(session.pk)
    messages = Message.objects.filter(session=session).count()
    total, done = semantic.index_progress(session_id=session.pk, messages=messages)
    assert semantic.ready(messages=total, indexed=done) is indexed
    query = "What happened with the dog Tom adopted this weekend?"

    def scores() -> dict[int, float]:
        return {hit.message_id: hit.score for hit in search_history(session=session, query=query, limit=10)}

    monkeypatch.setattr(search, "NEXT_WEIGHT", 0.0)
    alike = scores()
    assert alike[adopted.id] == pytest.approx(alike[fished.id], abs=1e-3)
    monkeypatch.setattr(search, "NEXT_WEIGHT", 1.0)
    lifted = scores()
    assert lifted[adopted.id] > lifted[fished.id] + 0.5
