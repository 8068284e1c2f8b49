"""The person's search across all their chats (`GET /search`; docs/search.md, "Across chats").

A chat's search (memory.search.search_history) ranks its messages against that chat's own statistics:
its term frequencies, its speakers, its sentence vectors, each score a z-score over the chat. Across
chats the same ranking runs in each chat worth searching, and the results meet on that scale:

1. The question's terms are weighed with the user's statistics (the chats' document frequencies and
   message counts summed over all the user's chats): a word common in one chat but rare across the
   user's chats still tells chats apart.
2. Each chat gets the summed weight of the terms it holds, plus DATE_CHAT_BONUS when it has a message
   on a day the question names: added up in the database from the term rows of the user's chats
   (memory_search_term by user_id, memory 0017), without visiting a chat that holds none of them.
   The chats of the days named are found in one query too (an index probe a chat and day), and only
   the best CHATS_SEARCHED by weight and the best CHATS_SEARCHED of those dated cross into Python:
   no other chat can be among the best once the dated ones gain their bonus (chats_chosen).
   The best CHATS_SEARCHED chats with a positive score are searched; a question none of whose words
   any chat holds (and that names no day one has) searches the chats with the newest messages, where
   meaning alone may still find it.
3. Each of those chats is searched as its own search does it (words, cues, meaning, with its own
   statistics), the first on the caller's thread and the others at the same time on the process's
   chat-search threads (`_chats_searched`), and the hits are merged by score: each score is the
   message's distance from its own chat's mean in standard deviations, plus the cues' boosts, so it
   says how much a message stands out in its chat whatever the chat's size. But a z-score is highest
   where the question's words are rarest, so a chat that mentions them once would outrank the chat that
   is about them; two terms say which chat the question is about: CHAT_SHARE_WEIGHT × the chat's score
   (step 2) as a share of the best chat's, and CHAT_SPEAKER_BOOST (the speaker cue's own weight) when
   the question names one of the chat's speakers (cues).

Never anything of another user: only the user's term rows are read, and a chat is searched only once
conversations_session says it is the user's (and the agent's when one is given). The model's memory
tools call search_history on their own chat only: nothing here is reachable from a turn.
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import close_old_connections, connection

from conversations.models import Agent, Session
from conversations.services import UnknownAgent
from lib.threads import ProcessThreads
from memory import semantic
from memory.search import MAX_LIMIT, SPEAKER_BOOST, SearchHit, search_history, speakers_lately
from textsearch.cues import date_spans, named_speaker, without_names
from textsearch.ranking import idf
from textsearch.text import query_terms, snippet

# How many chats one search ranks in full (each costs about one chat's search); chosen on LoCoMo and
# the 1,000-chat data set of bench/search.py (docs/benchmarks.md).
CHATS_SEARCHED = 4
# A chat with a message on a day the question names counts as holding one more of its words.
DATE_CHAT_BONUS = 1.0
DEFAULT_LIMIT = 20
# Added to every hit of a chat one of whose speakers the question names ("What did Caroline paint?"
# in a transcript where Caroline speaks): inside the chat her messages gain the speaker cue's boost
# over the others; across chats, her chat gains it over chats where she does not speak.
CHAT_SPEAKER_BOOST = SPEAKER_BOOST
# Added to every hit of a chat: this × the chat's score as a share of the best chat's. Chosen on half of
# the LoCoMo questions (bench/recall.py --across; docs/benchmarks.md).
CHAT_SHARE_WEIGHT = 20.0


@dataclass(frozen=True)
class ChatHit:
    message_id: int
    agent: str
    chat_id: str
    chat_title: str
    role: str
    created_at: datetime
    snippet: str
    score: float


@dataclass(frozen=True)
class _Chat:
    session_id: int
    agent: str
    chat_id: str
    title: str
    messages: int
    last_id: int


def search_all_chats(*, user: AbstractBaseUser, query: str, agent: str | None = None, limit: int = DEFAULT_LIMIT):
    """The user's messages, in every chat (of `agent` when given: UnknownAgent when no agent has that
    slug), that best answer `query`, best first, at most `limit` (clamped to 1–MAX_LIMIT)."""
    limit = max(1, min(MAX_LIMIT, limit))
    agent_id = None
    if agent:
        agent_id = Agent.objects.filter(slug=agent).values_list("id", flat=True).first()
        if agent_id is None:
            raise UnknownAgent(agent)
    terms = query_terms(query)
    spans = date_spans(query)
    if not terms and not spans:
        return []
    encodings = _encoding_started(query)
    choice = chats_chosen(user_id=user.pk, agent_id=agent_id, terms=terms, spans=spans)
    if not choice.chats:
        return []
    chosen, scores = choice.chats, choice.scores
    best = max(scores[chat.session_id] for chat in chosen)
    sessions = {session.pk: session for session in Session.objects.filter(pk__in=[chat.session_id for chat in chosen])}
    found = _chats_searched(
        [sessions[chat.session_id] for chat in chosen], query=query, limit=limit, encodings=encodings
    )
    merged: list[tuple[float, int, ChatHit]] = []
    for chat, hits in zip(chosen, found, strict=True):
        boost = CHAT_SHARE_WEIGHT * scores[chat.session_id] / best if best > 0 else 0.0
        if named_speaker(query, _speakers(chat.session_id)):
            boost += CHAT_SPEAKER_BOOST
        for hit in hits:
            score = round(hit.score + boost, 4)
            merged.append(
                (
                    score,
                    hit.message_id,
                    ChatHit(
                        message_id=hit.message_id,
                        agent=chat.agent,
                        chat_id=chat.chat_id,
                        chat_title=chat.title,
                        role=hit.role,
                        created_at=hit.created_at,
                        snippet=hit.snippet,
                        score=score,
                    ),
                )
            )
    merged.sort(key=lambda item: (-item[0], -item[1]))
    # The chats' hits carry their whole text: only those kept are cut into snippets.
    return [replace(hit, snippet=snippet(hit.snippet, terms)) for _, _, hit in merged[:limit]]


def _chats_searched(
    sessions: list[Session], *, query: str, limit: int, encodings: dict[str, Future]
) -> list[list[SearchHit]]:
    """Each chat's own search (search_history), in the order of `sessions`. The chats after the first
    are searched on the process's chat-search threads, each on a database connection of its own, while
    this thread searches the first: on PostgreSQL a chat's search mostly waits for the server, which
    the other searches fill (docs/benchmarks.md). Inside a transaction they are searched here one after
    the other, on this connection: another connection could not see what the transaction wrote."""
    if len(sessions) < 2 or connection.in_atomic_block:
        return [_search(session, query=query, limit=limit, encodings=encodings) for session in sessions]
    pool = _chat_threads.pool()
    later = [
        pool.submit(_search_on_thread, session, query=query, limit=limit, encodings=encodings)
        for session in sessions[1:]
    ]
    try:
        first = _search(sessions[0], query=query, limit=limit, encodings=encodings)
    finally:
        found = [future.result() for future in later]
    return [first, *found]


def _search(session: Session, *, query: str, limit: int, encodings: dict[str, Future]) -> list[SearchHit]:
    return search_history(session=session, query=query, limit=limit, encodings=encodings, snippets=False)


def _search_on_thread(session: Session, **kwargs) -> list[SearchHit]:
    try:
        return _search(session, **kwargs)
    finally:
        # As at the end of a request: the thread's connection is kept while BUDDY_DB_CONN_MAX_AGE and the
        # health check allow, or handed back to the pool (PostgreSQL with BUDDY_DB_POOL).
        close_old_connections()


# The threads that search a search's later chats (all but its first), shared by the process's searches:
# when all are busy, a search's later chats wait for one while its own thread searches its first chat.
SEARCH_THREADS = CHATS_SEARCHED - 1
_chat_threads = ProcessThreads(workers=SEARCH_THREADS, name="chat-search")


def _encoding_started(query: str) -> dict[str, Future]:
    """The question's vector under way (semantic search on), by the text a chat's search encodes when
    the question names none of its speakers: started before the choice of chats, so that the encoding
    runs beside it, and shared by every chat searched whose speakers the question does not name
    (search_history's `encodings`). Empty when semantic search is off or the encoder cannot start
    (each chat's search then tries, and says why)."""
    if not semantic.enabled():
        return {}
    text = without_names(query, set()) or query
    try:
        return {text: semantic.query_vector(text)}
    except Exception:
        return {}


def _speakers(session_id: int) -> set[str]:
    """The chat's speakers as its search just read them (memory.search keeps them per chat searched)."""
    return speakers_lately(session_id) or set()


@dataclass(frozen=True)
class Choice:
    """The chats a search ranks in full (best first), and each one's summed term weight (with the bonus
    of a day the question names)."""

    chats: list[_Chat]
    scores: dict[int, float]


def chats_chosen(
    *, user_id: int, agent_id: int | None, terms: list[str], spans: list[tuple[datetime, datetime]]
) -> Choice:
    """The CHATS_SEARCHED chats of the user (of `agent_id` when given) worth searching for `terms` and
    the days of `spans`, from the user's term rows (memory_search_term by user, memory 0017): the
    user's document frequency of each term gives its weight, then each chat's summed weight of the
    terms it holds is added up in the database. Two range reads of the (user, term) index a term,
    however many chats the user has; only the best chats' rows cross into Python.

    With `spans`, the chosen chats are among the best CHATS_SEARCHED by summed weight and the best
    CHATS_SEARCHED of the dated chats (a message in a span) by the same order, whatever the number of
    chats: a chat outside both has CHATS_SEARCHED chats above it that stay above it once the dated
    chats gain DATE_CHAT_BONUS (when it has no bonus, the best by weight, which lose nothing; when it
    has it, the best dated chats, which have it too)."""
    frequencies, messages = _user_statistics(user_id, terms)
    weights = {term: idf(df, messages) ** 2 for term, df in frequencies.items()}
    scores, last_ids = _chat_weights(user_id, agent_id, weights)
    if spans:
        bonus = DATE_CHAT_BONUS * max([1.0, *weights.values()])
        dated, dated_last_ids = _dated_chat_weights(user_id, agent_id, weights, spans)
        for session_id, score in dated.items():
            scores[session_id], last_ids[session_id] = score + bonus, dated_last_ids[session_id]
    ranked = sorted(
        (session_id for session_id, score in scores.items() if score > 0 and math.isfinite(score)),
        key=lambda session_id: (-scores[session_id], -last_ids[session_id]),
    )[:CHATS_SEARCHED]
    if not ranked:
        chosen = _newest_chats(user_id, agent_id)
        return Choice(chosen, {chat.session_id: 0.0 for chat in chosen})
    chats = _chats(user_id, agent_id, set(ranked))
    return Choice(
        [chats[session_id] for session_id in ranked if session_id in chats],
        {session_id: scores[session_id] for session_id in ranked},
    )


def _user_statistics(user_id: int, terms: list[str]) -> tuple[dict[str, int], int]:
    """For those of `terms` any chat of the user holds, their document frequency summed over the
    user's chats (a range of the (user, term) index each); and the user's message count."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(st.messages), 0) FROM conversations_session AS s"
            " JOIN memory_search_session AS st ON st.session_id = s.id WHERE s.user_id = %s",
            [user_id],
        )
        messages = int(cursor.fetchone()[0])
        if not terms:
            return {}, messages
        cursor.execute(
            "SELECT term, sum(df) FROM memory_search_term"
            f" WHERE user_id = %s AND term IN ({', '.join(['%s'] * len(terms))}) AND df > 0 GROUP BY term",
            [user_id, *terms],
        )
        return {term: int(df) for term, df in cursor.fetchall()}, messages


# Scores summed in SQL are rounded before they are compared: chats holding the same terms tie, however
# the database ordered the additions.
_SCORE_DIGITS = 9


def _chat_weights(
    user_id: int, agent_id: int | None, weights: dict[str, float]
) -> tuple[dict[int, float], dict[int, int]]:
    """The best CHATS_SEARCHED of the user's chats (of `agent_id` when given) holding any of the weighed
    terms (ties: the newest messages first) → their summed weight, and → the id of their newest
    message. Summed and sorted in the database, from the (user, term) index: one range a term."""
    if not weights:
        return {}, {}
    agent_join = " JOIN conversations_session AS s ON s.id = g.session_id AND s.agent_id = %s" if agent_id else ""
    scored = (
        f"SELECT g.session_id, round(CAST(g.score AS NUMERIC), {_SCORE_DIGITS}) AS score, st.last_id FROM ("
        " SELECT t.session_id, sum(w.weight) AS score FROM memory_search_term AS t"
        f" JOIN ({_weights_table(weights)}) AS w ON w.term = t.term WHERE t.user_id = %s AND t.df > 0"
        f" GROUP BY t.session_id) AS g JOIN memory_search_session AS st ON st.session_id = g.session_id{agent_join}"
        " ORDER BY score DESC, st.last_id DESC LIMIT %s"
    )
    params = [*_weights_params(weights), user_id, *([agent_id] if agent_id else []), CHATS_SEARCHED]
    with connection.cursor() as cursor:
        cursor.execute(scored, params)
        rows = cursor.fetchall()
    return {row[0]: float(row[1]) for row in rows}, {row[0]: row[2] for row in rows}


def _dated_chat_weights(
    user_id: int, agent_id: int | None, weights: dict[str, float], spans: list[tuple[datetime, datetime]]
) -> tuple[dict[int, float], dict[int, int]]:
    """The best CHATS_SEARCHED of the user's chats (of `agent_id` when given) with a message in one of
    `spans` and a message indexed, by summed weight of the terms they hold (0 for none; ties: the newest
    messages first) → that weight, and → the id of their newest message. One query: each of the user's
    chats is one range read of the (session, created_at) index a span, stopping at its first message
    there, and only a dated chat's term rows are read (a primary-key lookup a term)."""
    score = "0"
    params: list[object] = []
    if weights:
        score = (
            f"(SELECT sum(w.weight) FROM ({_weights_table(weights)}) AS w JOIN memory_search_term AS t"
            " ON t.session_id = s.id AND t.term = w.term WHERE t.user_id = %s AND t.df > 0)"
        )
        params += [*_weights_params(weights), user_id]
    # A chat's first message in a span, not EXISTS: under OR, PostgreSQL answers an EXISTS from a hash of
    # every message in the span read off the whole (session, created_at) index, every user's. And "= 1",
    # not IS NOT NULL: PostgreSQL's planner takes an equality to keep few chats, as it does, where it
    # would count every chat in, and for a person of thousands of chats compile the query (JIT) for
    # the work it expects.
    in_span = " OR ".join(
        [
            "(SELECT 1 FROM conversations_message AS m"
            " WHERE m.session_id = s.id AND m.created_at >= %s AND m.created_at < %s LIMIT 1) = 1"
        ]
        * len(spans)
    )
    agent_filter = " AND s.agent_id = %s" if agent_id is not None else ""
    params += [user_id, *([agent_id] if agent_id is not None else []), *[bound for span in spans for bound in span]]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.id, round(CAST(coalesce({score}, 0) AS NUMERIC), {_SCORE_DIGITS}) AS score, st.last_id"
            " FROM conversations_session AS s"
            " JOIN memory_search_session AS st ON st.session_id = s.id AND st.messages > 0"
            f" WHERE s.user_id = %s{agent_filter} AND ({in_span})"
            " ORDER BY score DESC, st.last_id DESC LIMIT %s",
            [*params, CHATS_SEARCHED],
        )
        rows = cursor.fetchall()
    return {row[0]: float(row[1]) for row in rows}, {row[0]: row[2] for row in rows}


def _weights_table(weights: dict[str, float]) -> str:
    """The weighed terms as a table of (term, weight) rows, for _weights_params's parameters."""
    return " UNION ALL ".join(["SELECT %s AS term, %s AS weight"] * len(weights))


def _weights_params(weights: dict[str, float]) -> list[object]:
    return [value for item in weights.items() for value in item]


_CHAT_COLUMNS = (
    "SELECT s.id, a.slug, s.chat_id, s.title, st.messages, st.last_id FROM conversations_session AS s"
    " JOIN conversations_agent AS a ON a.id = s.agent_id"
    " JOIN memory_search_session AS st ON st.session_id = s.id AND st.messages > 0"
)


def _chats(user_id: int, agent_id: int | None, session_ids: set[int]) -> dict[int, _Chat]:
    """Those of the chats that are the user's (and `agent_id`'s when given) and hold a message."""
    if not session_ids:
        return {}
    ids = sorted(session_ids)
    agent_filter = " AND s.agent_id = %s" if agent_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"{_CHAT_COLUMNS} WHERE s.id IN ({', '.join(['%s'] * len(ids))}) AND s.user_id = %s{agent_filter}",
            [*ids, user_id, *([agent_id] if agent_id is not None else [])],
        )
        return {row[0]: _Chat(*row) for row in cursor.fetchall()}


def _newest_chats(user_id: int, agent_id: int | None) -> list[_Chat]:
    """The user's CHATS_SEARCHED chats (of `agent_id` when given) with the newest messages."""
    agent_filter = " AND s.agent_id = %s" if agent_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"{_CHAT_COLUMNS} WHERE s.user_id = %s{agent_filter} ORDER BY st.last_id DESC LIMIT %s",
            [user_id, *([agent_id] if agent_id is not None else []), CHATS_SEARCHED],
        )
        return [_Chat(*row) for row in cursor.fetchall()]
