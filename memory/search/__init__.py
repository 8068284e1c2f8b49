"""History search: natural-language queries over one session's archive, best first (docs/search.md).

The database finds candidates, Python ranks them, the same way on both backends:

1. The query becomes distinct terms (textsearch.text): stop words and question words dropped,
   stemmed; and cues (textsearch.cues): the chat speaker it names, the days it names. No term and
   no day → no results.
2. Per-session statistics give each term's document frequency `df` and the session's size; a term in
   no message of the session is dropped. Each query term weighs `idf²` (textsearch.ranking): BM25's IDF on
   the message side times the same IDF as the query term's own weight, so that a common word of the
   question ("get", "new", "go") mostly breaks ties between messages that hold its rarer words.
3. The index (FTS5 on SQLite, GIN on PostgreSQL; memory.search.sqlite / .postgres) lists the messages
   holding each term in their own text or in their context (the message before them, and inside a
   turn the prompt that started it). A term that matches more than `CANDIDATES_PER_TERM` messages
   contributes only its newest matches, about that many: this bounds the work of common words on a
   long archive. Its older matches still count in full in messages that come in through a rarer term.
   The best `RESCORED_CANDIDATES` by summed weight are the word candidates; the first messages of each
   day the query names, and with semantic search the messages nearest in meaning, join them.
4. Every candidate is scored: BM25F over two fields (the message's own terms, and its context at
   `CONTEXT_WEIGHT`) as a z-score over the chat, plus SEMANTIC_WEIGHT × the z-score of its similarity to
   the question (memory.semantic) and NEXT_WEIGHT × that of the message after it (a question is often
   answered by a message and the reply to it), plus DAY_WORDS_WEIGHT and DAY_MEANING_WEIGHT × the best
   of those two z-scores among the candidates written on its day (what a day's conversation was
   about), plus SPEAKER_BOOST when the query names its speaker and DATE_BOOST when it was written on a
   day the query names.
5. The best DIVERSE_AFTER come first; each result after them is picked among the next DIVERSE_POOL
   by its score minus REDUNDANCY_PENALTY × its largest term overlap with a result above
   (textsearch.ranking.diversified), so that near-copies do not take the slots of other evidence.

Higher scores are better. The constants were chosen on real conversations (bench/recall.py; the
figures and each part's share are in docs/benchmarks.md).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.utils.dateparse import parse_datetime

from conversations.models import Session
from memory import semantic
from memory.search import postgres, sqlite
from memory.search.shortlist import ROW_COLUMNS, ROW_TABLES, Lookup, shortlist_sql
from memory.semantic.postgres import binary_rows
from textsearch import cues, ranking
from textsearch.speakers import LABEL_CHARS
from textsearch.text import query_terms, snippet

# The cues' boosts (in standard deviations of the fused score), chosen on real conversations
# (bench/recall.py, the LoCoMo figures in docs/benchmarks.md); BM25F's parameters and diversity's are
# textsearch.ranking's.
SPEAKER_BOOST = 5.0
DATE_BOOST = 5.0
# The similarity of the message after a candidate, and the best words and meaning of its day's
# candidates (UTC days), each as a weight on a z-score (module docstring).
NEXT_WEIGHT = 1.0
DAY_WORDS_WEIGHT = 0.5
DAY_MEANING_WEIGHT = 0.5
# Messages per day the query names that join the candidates.
DATE_CANDIDATES = 200
# The newest messages whose starts tell the chat's speakers.
SPEAKER_SAMPLE = 40
# In a chat still being indexed, the best candidates by words that are re-ranked by meaning.
RERANKED_CANDIDATES = 20
CANDIDATES_PER_TERM = 250
# The word candidates that are scored: as many as ranks the LoCoMo answers as well as more do
# (docs/benchmarks.md); each costs its row's transfer and its scoring.
RESCORED_CANDIDATES = 150
MAX_LIMIT = 50

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchHit:
    message_id: int
    role: str
    created_at: datetime
    snippet: str
    score: float


@dataclass(frozen=True)
class _SessionStats:
    messages: int
    body_terms: int
    context_terms: int
    first_id: int
    last_id: int
    indexed: int  # messages with a semantic vector (memory.semantic.index_count)

    @property
    def average_body(self) -> float:
        return max(1.0, self.body_terms / max(1, self.messages))

    @property
    def average_context(self) -> float:
        return max(1.0, self.context_terms / max(1, self.messages))

    @property
    def matches_per_message(self) -> float:
        """How many messages a term matches, in text or context, per message holding it in its text:
        the message itself and, through their context, its reply and the rest of its turn. Estimated
        for the session as 1 + context terms per text term (the text's counted with repeats, so a little
        low)."""
        return 1.0 + self.context_terms / max(1, self.body_terms)


def _backend():
    if connection.vendor == "postgresql":
        return postgres
    if connection.vendor == "sqlite":
        return sqlite
    raise NotImplementedError(f"history search supports SQLite and PostgreSQL, not {connection.vendor}")


def _statistics(session_id: int, terms: list[str]) -> tuple[_SessionStats | None, dict[str, tuple], set[str]]:
    """The session's statistics; for those of `terms` it holds, their document frequency and the index
    backend's own statistics of them (TERM_COLUMNS); and the chat's speakers (cues.speakers, from the
    starts of its newest SPEAKER_SAMPLE messages). In one query: a search is a handful of short
    queries, and each round trip counts."""
    terms = terms or [""]  # no term is empty: a query of dates alone matches none
    placeholders = ", ".join(["%s"] * len(terms))
    extra = "".join(f", t.{column}" for column in _backend().TERM_COLUMNS)
    # The speakers' sample is a subquery that does not depend on the row: computed once. On
    # PostgreSQL `= ANY(ARRAY[id])`, as conversations.window.selectors.session_messages_since explains:
    # with `=`, the planner may walk the primary key back through every other chat's newer messages.
    # On SQLite a JSON array: a label may hold any character, a separator included.
    if connection.vendor == "postgresql":
        starts, in_session, session_param = "array_agg(start)", "= ANY(%s)", [session_id]
    else:
        starts, in_session, session_param = "json_group_array(start)", "= %s", session_id
    sample = (
        f"(SELECT {starts} FROM (SELECT substr(text, 1, {LABEL_CHARS}) AS start"
        f" FROM memory_searchdocument WHERE session_id {in_session}"
        " ORDER BY session_id DESC, message_id DESC LIMIT %s) AS sample)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.messages, s.body_terms, s.context_terms, s.first_id, s.last_id, coalesce(v.indexed, 0),"
            f" {sample}, t.term, t.df{extra}"
            " FROM memory_search_session AS s LEFT JOIN memory_search_term AS t"
            f" ON t.session_id = s.session_id AND t.term IN ({placeholders}) AND t.df > 0"
            " LEFT JOIN memory_vectorindex AS v ON v.session_id = s.session_id"
            " WHERE s.session_id = %s",
            [session_param, SPEAKER_SAMPLE, *terms, session_id],
        )
        rows = cursor.fetchall()
    if not rows or rows[0][0] <= 0:
        return None, {}, set()
    starts = rows[0][6] or []
    if isinstance(starts, str):
        starts = json.loads(starts)
    term_stats = {row[7]: row[8:] for row in rows if row[7] is not None}
    return _SessionStats(*rows[0][:6]), term_stats, cues.speakers(starts)


def _newest_bound(df: int, stats: _SessionStats) -> int:
    """The lowest message id to look at for a term in the text of `df` messages: about
    CANDIDATES_PER_TERM of its matches (text and context: about twice `df`, see
    _SessionStats.matches_per_message) lie above it if they are spread evenly over the session's ids."""
    matches = df * stats.matches_per_message
    if matches <= CANDIDATES_PER_TERM:
        return 0
    span = stats.last_id - stats.first_id + 1
    return stats.last_id - math.ceil(span * CANDIDATES_PER_TERM / matches)


def rows_by_id(columns: str, *, session_id: int, ids: list[int]) -> list[tuple]:
    """Raw rows of the session's messages (table alias `t`, their search documents `d`) with these ids:
    a hot path, spared the ORM's query building (and on PostgreSQL one array parameter, not one
    placeholder per id: binding 200 placeholders costs psycopg a millisecond)."""
    sql = f"SELECT {columns} FROM {ROW_TABLES} WHERE t.session_id = %s AND t.id "
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql + "= ANY(%s)", [session_id, ids])
            return cursor.fetchall()
    rows: list[tuple] = []
    for start in range(0, len(ids), 5000):  # SQLite's limit on parameters is 32,766
        chunk = ids[start : start + 5000]
        with connection.cursor() as cursor:
            cursor.execute(sql + f"IN ({', '.join(['%s'] * len(chunk))})", [session_id, *chunk])
            rows += cursor.fetchall()
    return rows


def _aware(value: datetime | str) -> datetime:
    """A raw SQLite cursor returns the stored UTC text; PostgreSQL already returns an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = parse_datetime(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _day(value: datetime | str) -> str:
    """The UTC day of a message's `created_at` as a raw cursor returns it (SQLite's stored UTC text
    starts with it; _aware parses, which a search would do for every candidate)."""
    if isinstance(value, str):
        return value[:10]
    if value.tzinfo is None:
        return value.date().isoformat()
    return value.astimezone(UTC).date().isoformat()


def search_history(
    *,
    session: Session,
    query: str,
    limit: int = 5,
    encodings: dict[str, Future] | None = None,
    snippets: bool = True,
) -> list[SearchHit]:
    """The messages of `session` that best answer `query` (any text), best first, at most `limit`
    (clamped to 1–MAX_LIMIT). A query with no words left after stop words, and no date, finds nothing.

    Candidates come from the word index, from the days the query names (cues.date_spans) and, with
    semantic search on and the chat indexed (memory.semantic.ready), from the sentence vectors nearest
    to the question. Each is scored by its BM25F and its similarity, each as a z-score over the chat,
    plus the speaker and date cues (module docstring).

    `encodings`: the question's vectors under way by the text encoded (the question without the
    chat's speakers' names), shared by the searches of several chats (memory.search.across): a text
    already there is not encoded again, one encoded here is added. `snippets=False`: each hit's
    `snippet` is the message's whole readable text, for a caller that cuts snippets (textsearch.text.
    snippet, with the query's terms) of only the hits it keeps."""
    limit = max(1, min(MAX_LIMIT, limit))
    terms = query_terms(query)
    spans = cues.date_spans(query)
    if not terms and not spans:
        return []
    early = _early_encoding(session.pk, query, encodings)
    stats, term_stats, chat_speakers = _statistics(session.pk, terms)
    if stats is None:
        return []
    _speakers_seen(session.pk, chat_speakers)
    encoder_query = cues.without_names(query, chat_speakers) or query
    encoding = early[1] if early is not None and early[0] == encoder_query else None
    if encoding is None and encodings is not None:
        encoding = encodings.get(encoder_query)
    near, rerank = _semantic_start(session.pk, encoder_query, stats=stats, encoding=encoding)
    if encodings is not None and near is not None:
        encodings.setdefault(encoder_query, near.encoding)
    elif encodings is not None and rerank is not None:
        encodings.setdefault(encoder_query, rerank)
    terms = [term for term in terms if term in term_stats]
    weights = {term: ranking.term_weight(term_stats[term][0], stats.messages) for term in terms}
    vectors_before = near.window_start if near is not None else None
    rows = _lexical_rows(
        session_id=session.pk,
        stats=stats,
        term_stats=term_stats,
        weights=weights,
        limit=limit,
        vectors_before=vectors_before,
    )
    rows += _date_rows(session_id=session.pk, spans=spans, vectors_before=vectors_before, seen={row[0] for row in rows})
    similarity: dict[int, float] = {}
    following: dict[int, float] = {}
    if near is not None:
        try:
            similarity, following, rows = _semantic_side(session.pk, near.result(), rows)
        except Exception:  # a broken model install must cost the meaning, not the search
            logger.exception("semantic search failed; ranked by words only")
            similarity, following = {}, {}
    scored = _fused(
        rows=rows,
        weights=weights,
        stats=stats,
        similarity=similarity,
        following=following,
        speaker=cues.named_speaker(query, chat_speakers),
        spans=spans,
    )
    if rerank is not None:
        try:
            scored = _reranked(session.pk, scored, rerank, {row[0]: _day(row[3]) for row in rows})
        except Exception:
            logger.exception("semantic search failed; ranked by words only")
    # A few more than asked: a message deleted since its vector was cached is dropped here.
    scored = ranking.diversified(scored, {row[0]: row[1] for row in rows}, count=limit + 5)
    if not scored:
        return []
    details = {
        message_id: (role, created_at, text)
        for message_id, role, created_at, text in rows_by_id(
            "t.id, t.role, t.created_at, d.text",
            session_id=session.pk,
            ids=[message_id for _, message_id in scored],
        )
    }
    hits = []
    for score, message_id in scored:
        if len(hits) == limit:
            break
        if message_id not in details:
            continue
        role, created_at, text = details[message_id]
        hits.append(
            SearchHit(
                message_id=message_id,
                role=role,
                created_at=_aware(created_at),
                snippet=snippet(text, terms) if snippets else text,
                score=round(score, 4),
            )
        )
    return hits


# The speakers of the chats searched lately in this process (`_early_encoding`), at most SPEAKERS_KEPT.
SPEAKERS_KEPT = 10_000
_speakers_lately: OrderedDict[int, set[str]] = OrderedDict()
_speakers_lock = threading.Lock()


def speakers_lately(session_id: int) -> set[str] | None:
    """The chat's speakers as its latest search in this process read them; None before any."""
    with _speakers_lock:
        return _speakers_lately.get(session_id)


def _early_encoding(
    session_id: int, query: str, encodings: dict[str, Future] | None = None
) -> tuple[str, Future] | None:
    """(text, its vector under way) of the question as the semantic side will encode it if the chat's
    speakers are still those of its last search in this process: started before the chat's statistics
    are read (which tell its speakers), so that the encoding, the longest part of a search, runs beside
    that query too. The search uses it only if the text it needs is this one. None when there was no
    search of the chat yet, or semantic search is off."""
    speakers = speakers_lately(session_id)
    if speakers is None or not semantic.enabled():
        return None
    text = cues.without_names(query, speakers) or query
    if encodings is not None and text in encodings:
        return text, encodings[text]
    try:
        return text, semantic.query_vector(text)
    except Exception:  # the search starts it again, and says why if it fails again
        return None


def _speakers_seen(session_id: int, speakers: set[str]) -> None:
    with _speakers_lock:
        _speakers_lately[session_id] = speakers
        _speakers_lately.move_to_end(session_id)
        while len(_speakers_lately) > SPEAKERS_KEPT:
            _speakers_lately.popitem(last=False)


def _semantic_start(session_id: int, query: str, *, stats: _SessionStats, encoding: Future | None = None):
    """The search's semantic side, started to run beside the word lookup: (memory.semantic.nearest,
    None) for an indexed chat (memory.semantic.ready); (None, the question's vector under way) for a
    chat still being indexed, whose best word candidates are re-ranked (`_reranked`); (None, None) when
    semantic search is off or could not start (logged: the search goes on by words). `encoding`: the
    question's vector already under way (`_early_encoding`)."""
    if not semantic.enabled():
        return None, None
    try:
        if semantic.ready(messages=stats.messages, indexed=stats.indexed):
            return semantic.nearest(
                session_id=session_id,
                query=query,
                indexed=stats.indexed,
                messages=stats.messages,
                encoding=encoding,
            ), None
        return None, encoding or semantic.query_vector(query)
    except Exception:
        logger.exception("semantic search failed; ranked by words only")
        return None, None


def _reranked(
    session_id: int, scored: list[tuple[float, int]], query_vector, days: dict[int, str]
) -> list[tuple[float, int]]:
    """`scored` with its best RERANKED_CANDIDATES re-scored by meaning, for a chat still being indexed:
    a half-indexed chat cannot be scanned without ranking what has no vector yet lower, so instead the
    best word candidates and the messages after them get their vectors (stored, or encoded now for
    those still waiting), and the parts of `_fused` that need vectors are added, with z-scores among
    the re-ranked candidates: SEMANTIC_WEIGHT × their similarity, NEXT_WEIGHT × that of the message
    after each, DAY_MEANING_WEIGHT × the best similarity among those of its day (`days`: id → day)."""
    head, tail = scored[:RERANKED_CANDIDATES], scored[RERANKED_CANDIDATES:]
    if len(head) < 2:
        return scored
    ids = [message_id for _, message_id in head]
    after = _following_ids(session_id, ids)
    similarity = semantic.candidate_similarities(
        session_id=session_id,
        ids=list(dict.fromkeys(ids + list(after.values()))),
        vector=query_vector.result(timeout=semantic.RESULT_SECONDS),
    )
    values = [similarity[message_id] for message_id in ids]
    mean = sum(values) / len(values)
    deviation = math.sqrt(sum((value - mean) ** 2 for value in values) / len(values)) or 1.0
    meaning = {message_id: (similarity[message_id] - mean) / deviation for message_id in ids}
    following = {
        message_id: (similarity[next_id] - mean) / deviation
        for message_id, next_id in after.items()
        if next_id in similarity
    }
    best_meaning: dict = {}
    for message_id in ids:
        day = days.get(message_id)
        best_meaning[day] = max(best_meaning.get(day, meaning[message_id]), meaning[message_id])
    head = [
        (
            score
            + semantic.SEMANTIC_WEIGHT * meaning[message_id]
            + NEXT_WEIGHT * following.get(message_id, 0.0)
            + DAY_MEANING_WEIGHT * best_meaning[days.get(message_id)],
            message_id,
        )
        for score, message_id in head
    ]
    return sorted(head + tail, reverse=True)


def _following_ids(session_id: int, ids: list[int]) -> dict[int, int]:
    """The id of the message after each of `ids` in the session (those that have one)."""
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.id, (SELECT min(n.id) FROM conversations_message AS n WHERE n.session_id = m.session_id"
            f" AND n.id > m.id) FROM conversations_message AS m WHERE m.session_id = %s AND m.id IN ({placeholders})",
            [session_id, *ids],
        )
        return {message_id: next_id for message_id, next_id in cursor.fetchall() if next_id is not None}


def _lexical_rows(
    *,
    session_id: int,
    stats: _SessionStats,
    term_stats: dict[str, tuple],
    weights: dict[str, float],
    limit: int,
    vectors_before: int | None,
) -> list[tuple]:
    """The rows (ROW_COLUMNS and vector) of the messages with the highest summed weight of the query's
    terms, at most max(RESCORED_CANDIDATES, 4 × limit)."""
    if not weights:
        return []
    lookups = [
        Lookup(
            term=term,
            min_id=_newest_bound(term_stats[term][0], stats),
            weight=weight,
            index_stats=term_stats[term][1:],
        )
        for term, weight in weights.items()
    ]
    # The shortlist and its rows in one statement: one round trip, and no ids sent back.
    return list(
        _backend().candidates(
            session_id=session_id,
            lookups=lookups,
            first_id=stats.first_id,
            max_id=stats.last_id,
            limit=max(RESCORED_CANDIDATES, 4 * limit),
            vectors_before=vectors_before,
        )
    )


def _date_rows(
    *, session_id: int, spans: list[tuple[datetime, datetime]], vectors_before: int | None, seen: set[int]
) -> list[tuple]:
    """The rows of the messages of the days the query names, DATE_CANDIDATES per span at most (the
    first of the span: a day's conversation starts with what it is about); those in `seen` left out."""
    rows: list[tuple] = []
    for start, end in spans:
        sql = shortlist_sql(
            "(SELECT id FROM conversations_message WHERE session_id = %s AND created_at >= %s"
            " AND created_at < %s ORDER BY created_at, id LIMIT %s) AS c",
            vectors_before=vectors_before,
        )
        params = [session_id, start, end, DATE_CANDIDATES, session_id]
        if connection.vendor == "postgresql" and vectors_before is not None:
            found = binary_rows(sql, params)
        else:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                found = cursor.fetchall()
        for row in found:
            if row[0] not in seen:
                seen.add(row[0])
                rows.append(row)
    return rows


def _semantic_side(session_id: int, near, rows: list[tuple]) -> tuple[dict[int, float], dict[int, float], list[tuple]]:
    """Each candidate's similarity to the question as a z-score over the chat's window (its vector from
    the window, or fetched with its row when older), that of the message after it in the window, and
    the rows of the nearest messages that are not candidates yet, added to `rows`."""
    older = {row[0]: row[5] for row in rows if row[5] is not None}
    similarity = semantic.similarities(near=near, ids=[row[0] for row in rows], vectors=older)
    seen = {row[0] for row in rows}
    new_ids = [message_id for message_id in near.nearest if message_id not in seen]
    if new_ids:
        rows = rows + [(*row, None) for row in rows_by_id(ROW_COLUMNS, session_id=session_id, ids=new_ids)]
        similarity.update({message_id: near.nearest[message_id] for message_id in new_ids})
    mean, deviation = near.mean, near.deviation
    following = semantic.next_similarities(near=near, ids=[row[0] for row in rows])
    return (
        {message_id: (value - mean) / deviation for message_id, value in similarity.items()},
        {message_id: (value - mean) / deviation for message_id, value in following.items()},
        rows,
    )


def _fused(
    *,
    rows: list[tuple],
    weights: dict[str, float],
    stats: _SessionStats,
    similarity: dict[int, float],
    following: dict[int, float],
    speaker: str | None,
    spans: list[tuple[datetime, datetime]],
) -> list[tuple[float, int]]:
    """(score, id) of every candidate, best first: z(BM25F) + SEMANTIC_WEIGHT × z(similarity) (0 for
    a candidate without a vector) + NEXT_WEIGHT × z(similarity of the message after it) +
    DAY_WORDS_WEIGHT × the best z(BM25F) and DAY_MEANING_WEIGHT × the best z(similarity) among the
    candidates of its day + SPEAKER_BOOST when the query names its speaker + DATE_BOOST when it was
    written on a day the query names. BM25F's z-score is over the whole chat: messages that are not
    candidates score 0."""
    lexical = (
        ranking.bm25f_many(
            terms=weights,
            fields=[(row[1], row[2]) for row in rows],
            average_body=stats.average_body,
            average_context=stats.average_context,
        )
        if weights
        else [0.0] * len(rows)
    )
    count = max(stats.messages, len(rows))
    mean = sum(lexical) / count
    deviation = math.sqrt(max(0.0, sum(score * score for score in lexical) / count - mean * mean)) or 1.0
    words = [(score - mean) / deviation for score in lexical]
    meaning = [similarity.get(row[0], 0.0) for row in rows]
    days = [_day(row[3]) for row in rows]
    best_words: dict = {}
    best_meaning: dict = {}
    for day, word_score, meaning_score in zip(days, words, meaning, strict=True):
        best_words[day] = max(best_words.get(day, word_score), word_score)
        best_meaning[day] = max(best_meaning.get(day, meaning_score), meaning_score)
    scored = []
    for row, word_score, meaning_score, day in zip(rows, words, meaning, days, strict=True):
        message_id, _, _, created_at, start = row[:5]
        score = word_score + semantic.SEMANTIC_WEIGHT * meaning_score
        score += NEXT_WEIGHT * following.get(message_id, 0.0)
        score += DAY_WORDS_WEIGHT * best_words[day] + DAY_MEANING_WEIGHT * best_meaning[day]
        if speaker is not None and cues.speaker_label(start or "") == speaker:
            score += SPEAKER_BOOST
        if spans:
            written = _aware(created_at)
            if any(first <= written < after for first, after in spans):
                score += DATE_BOOST
        scored.append((score, message_id))
    scored.sort(reverse=True)
    return scored
