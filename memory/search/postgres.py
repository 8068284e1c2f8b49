"""PostgreSQL backend: a stored tsvector of session-namespaced terms with a GIN index.

`memory_message_search` is a narrow side table, one row per message with terms: its id and a
tsvector of the terms of the message's text and context (its search document,
memory.models.SearchDocument), each prefixed with the session id
(`12_price`; once the term is common in the session, with the block of ids instead: `12_price_61`,
see _vectors_insert), built with array_to_tsvector so that PostgreSQL's own parser never re-splits the
terms we computed in Python. Positions and weights are not stored; ranking (memory.search) needs only
which messages hold a term.

Why a side table and not a column of memory_searchdocument: a GIN match is a heap visit to fetch
the row's id, and a document row (readable text, terms, context) is kilobytes, so on a
long archive the visits of one query land on pages that are rarely in shared_buffers. Side-table rows
are ~0.7 KB: the recent part of an archive, where bounded lookups of common terms go
(memory.search), stays cached.

The side table and the per-session statistics (message count, term counts; per term its document
frequency and where its plain list ends) are kept by statement-level triggers, so a bulk insert or
COPY updates them once per statement, not per row.
"""

from __future__ import annotations

from django.db import connection

from memory.search.shortlist import Lookup, shortlist_sql
from memory.semantic.postgres import binary_rows
from textsearch.text import index_prefix

# Once a term is in this many messages of a session, its new postings go into blocks of ids, and its
# plain posting list stops growing. Blocks hold 2**BLOCK_BITS ids: a bounded lookup reads on average
# half a block of postings below its bound, so smaller blocks read less (4,096 ids: 20 extra postings
# for a term in 1 % of the messages; 16,384: 80), at the price of more, shorter lists in the index.
# The index is written with these numbers: changing either needs a migration that rebuilds it.
COMMON_DF = 500
BLOCK_BITS = 12

_COUNT = "coalesce(array_length(string_to_array(nullif({0}, ''), ' '), 1), 0)"


def _vectors_insert(rows: str) -> str:
    """The side-table rows of `rows`: one lexeme per distinct term of a message's text and context,
    `12_price` (session 12) while the message is within the term's plain list (its id is at most the
    term's `plain_last`, see _terms_added), `12_price_61` (block 61 of the ids) past it.

    A rare term is looked up by its plain lexeme: one short list. A common term is looked up by the
    blocks of the id range memory.search bounds it to (its newest matches), and by its plain list only
    when the range reaches back into it: a few short lists, never one as long as the archive, whose
    decoding alone would cost milliseconds per term at 1M messages. Each posting is stored once.
    Runs after _terms_added, which has set `plain_last` for this statement's rows."""
    return f"""
        INSERT INTO memory_message_search (id, vector)
            SELECT r.message_id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.message_id > t.plain_last THEN '_' || (r.message_id >> {BLOCK_BITS})::text ELSE '' END))
            FROM {rows} AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.terms || ' ' || r.context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.message_id;"""


def _vectors_delete(rows: str) -> str:
    return f"""
        DELETE FROM memory_message_search WHERE id IN (SELECT message_id FROM {rows});"""


def _session_change(rows: str, sign: str) -> str:
    """The sessions' statistics of added (sign '') or removed ('-') documents."""
    body = _COUNT.format("r.terms")
    context = _COUNT.format("r.context")
    return f"""
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT r.session_id, {sign}count(*), {sign}sum({body}), {sign}sum({context}),
                min(r.message_id), max(r.message_id), {sign}sum(r.tokens)
            FROM {rows} AS r GROUP BY r.session_id ORDER BY r.session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);"""


def _row_terms(rows: str) -> str:
    """Per message of `rows` (as r), its distinct terms (u.term) and whether each is in its own text
    (u.body) or only in its context."""
    return f"""FROM {rows} AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u"""


def _terms_added(rows: str) -> str:
    """Statistics of the terms of appended rows: `df` counts the messages holding the term in their own
    text; `last_id` is the newest message holding it in text or context, and `plain_last` the newest
    written to its plain list. A term's postings are plain while it is in fewer than COMMON_DF
    messages of the session before the statement (and has no blocks yet), blocked from then on.

    The upsert takes the term's row lock before _vectors_insert reads `plain_last`, so concurrent
    appends decide in turn, and every plain posting has an id of at most `plain_last`, every blocked
    one an id in (`plain_last`, `last_id`]: what a lookup needs to know which lists to read. Sorted,
    so that concurrent inserts lock term rows in one order and never deadlock."""
    return f"""
        INSERT INTO memory_search_term AS t (session_id, term, df, plain_last, last_id)
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body), max(r.message_id), max(r.message_id)
            {_row_terms(rows)}
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df,
                plain_last = CASE WHEN t.df < {COMMON_DF} AND t.last_id <= t.plain_last
                    THEN greatest(t.plain_last, excluded.plain_last) ELSE t.plain_last END,
                last_id = greatest(t.last_id, excluded.last_id);"""


def _terms_removed(rows: str) -> str:
    """Statistics of the terms of removed rows: only `df` falls; the bounds stay, an upper bound is
    all a lookup needs."""
    return f"""
        INSERT INTO memory_search_term AS t (session_id, term, df)
            SELECT r.session_id, u.term, -count(*) FILTER (WHERE u.body)
            {_row_terms(rows)}
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df;"""


# The owner of each chat's term rows (memory_search_term.user_id, memory 0017): search across a user's
# chats (memory.search.across) reads a term's chats on the (user, term) index instead of probing every
# chat. A new term row takes its chat's user (after it is inserted: an append's upsert of terms the chat
# already holds inserts none, and runs nothing); a chat given to another user moves its rows with it.
# Memory 0017 carries its own copy. The index is built after the fill (BACKFILL), as the GIN index is.
OWNER_INDEX = """CREATE INDEX IF NOT EXISTS memory_search_term_user ON memory_search_term (user_id, term, df DESC)
        INCLUDE (session_id)"""
OWNER_INSTALL = [
    """CREATE OR REPLACE FUNCTION memory_search_term_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE memory_search_term
                SET user_id = (SELECT user_id FROM conversations_session WHERE id = NEW.session_id)
                WHERE session_id = NEW.session_id AND term = NEW.term;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER memory_search_term_owner AFTER INSERT ON memory_search_term
        FOR EACH ROW WHEN (NEW.user_id IS NULL) EXECUTE FUNCTION memory_search_term_owner()""",
    """CREATE OR REPLACE FUNCTION memory_search_session_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE memory_search_term SET user_id = NEW.user_id WHERE session_id = NEW.id;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER memory_search_session_owner AFTER UPDATE OF user_id ON conversations_session
        FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION memory_search_session_owner()""",
]

INSTALL = [
    # Only ids and vectors: a narrow row keeps the pages a search visits few and cached (docstring).
    "CREATE TABLE memory_message_search (id bigint NOT NULL PRIMARY KEY, vector tsvector NOT NULL)",
    """CREATE TABLE memory_search_session (
        session_id bigint NOT NULL PRIMARY KEY, messages bigint NOT NULL,
        body_terms bigint NOT NULL, context_terms bigint NOT NULL,
        first_id bigint NOT NULL, last_id bigint NOT NULL, tokens bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE memory_search_term (
        session_id bigint NOT NULL, term text NOT NULL, df integer NOT NULL,
        plain_last bigint NOT NULL DEFAULT 0, last_id bigint NOT NULL DEFAULT 0, user_id bigint,
        PRIMARY KEY (session_id, term))""",
    f"""CREATE FUNCTION memory_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_session_change("new_rows", "")}
            {_terms_added("new_rows")}
            {_vectors_insert("new_rows")}
            RETURN NULL;
        END $$""",
    f"""CREATE FUNCTION memory_search_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_vectors_delete("old_rows")}
            {_session_change("old_rows", "-")}
            {_terms_removed("old_rows")}
            RETURN NULL;
        END $$""",
    f"""CREATE FUNCTION memory_search_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_vectors_delete("old_rows")}
            {_session_change("old_rows", "-")}
            {_terms_removed("old_rows")}
            {_session_change("new_rows", "")}
            {_terms_added("new_rows")}
            {_vectors_insert("new_rows")}
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_sessions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM memory_search_session WHERE session_id IN (SELECT id FROM old_rows);
            DELETE FROM memory_search_term WHERE session_id IN (SELECT id FROM old_rows);
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN TRUNCATE memory_message_search, memory_search_session, memory_search_term; RETURN NULL; END $$""",
    """CREATE TRIGGER memory_search_document_insert AFTER INSERT ON memory_searchdocument
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_inserted()""",
    """CREATE TRIGGER memory_search_document_delete AFTER DELETE ON memory_searchdocument
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_deleted()""",
    """CREATE TRIGGER memory_search_document_update AFTER UPDATE ON memory_searchdocument
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_updated()""",
    """CREATE TRIGGER memory_search_session_delete AFTER DELETE ON conversations_session
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_sessions_deleted()""",
    """CREATE TRIGGER memory_search_document_truncate AFTER TRUNCATE ON memory_searchdocument
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_truncated()""",
    *OWNER_INSTALL,
]

# Index what was archived before the index existed: statistics first, with the terms common by now
# (in COMMON_DF messages or more) given an empty plain list, so that they are written in blocks from
# the start; the GIN index is built after the fill (faster than growing it row by row).
BACKFILL = [
    _session_change("memory_searchdocument", ""),
    f"""INSERT INTO memory_search_term (session_id, term, df, plain_last, last_id, user_id)
        SELECT session_id, term, df, CASE WHEN df >= {COMMON_DF} THEN 0 ELSE last_id END, last_id,
            (SELECT user_id FROM conversations_session WHERE id = terms.session_id) FROM (
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body) AS df, max(r.message_id) AS last_id
            {_row_terms("memory_searchdocument")}
            GROUP BY 1, 2
        ) AS terms""",
    _vectors_insert("memory_searchdocument"),
    # fastupdate off: with it on, new postings wait in a pending list (up to 4 MB) until a vacuum, and
    # every lookup scans the whole list, so searches slow down as messages arrive. Writing into the
    # index directly adds next to nothing to a message append.
    "CREATE INDEX memory_message_search_vector ON memory_message_search USING gin (vector) WITH (fastupdate = off)",
    OWNER_INDEX,
]

UNINSTALL = [
    "DROP TRIGGER IF EXISTS memory_search_session_owner ON conversations_session",
    "DROP FUNCTION IF EXISTS memory_search_session_owner()",
    "DROP TRIGGER IF EXISTS memory_search_document_truncate ON memory_searchdocument",
    "DROP TRIGGER IF EXISTS memory_search_session_delete ON conversations_session",
    "DROP TRIGGER IF EXISTS memory_search_document_update ON memory_searchdocument",
    "DROP TRIGGER IF EXISTS memory_search_document_delete ON memory_searchdocument",
    "DROP TRIGGER IF EXISTS memory_search_document_insert ON memory_searchdocument",
    "DROP FUNCTION IF EXISTS memory_search_truncated()",
    "DROP TRIGGER IF EXISTS memory_search_term_owner ON memory_search_term",
    "DROP FUNCTION IF EXISTS memory_search_term_owner()",
    "DROP FUNCTION IF EXISTS memory_search_sessions_deleted()",
    "DROP FUNCTION IF EXISTS memory_search_updated()",
    "DROP FUNCTION IF EXISTS memory_search_deleted()",
    "DROP FUNCTION IF EXISTS memory_search_inserted()",
    "DROP TABLE IF EXISTS memory_search_term",
    "DROP TABLE IF EXISTS memory_search_session",
    "DROP TABLE IF EXISTS memory_message_search",
]


# The columns of memory_search_term that memory.search hands back in Lookup.index_stats.
TERM_COLUMNS = ("plain_last", "last_id")


def _tsquery(session_id: int, term: str, min_id: int, max_id: int, plain_last: int, last_id: int) -> str | None:
    """The lexemes holding the term's matches with ids in [min_id, max_id]: its plain lexeme if the
    range reaches back into the plain list, and the blocks of the part of the range past it. None when
    there are none."""
    lexeme = index_prefix(session_id) + term
    lexemes = [lexeme] if min_id <= plain_last else []
    low, high = max(min_id, plain_last + 1), min(max_id, last_id)
    if low <= high:  # a term has blocks only once its plain list stopped
        lexemes += [f"{lexeme}_{block}" for block in range(low >> BLOCK_BITS, (high >> BLOCK_BITS) + 1)]
    return " | ".join(f"'{lexeme}'" for lexeme in lexemes) or None


def candidates(
    *, session_id: int, lookups: list[Lookup], first_id: int, max_id: int, limit: int, vectors_before: int | None = None
) -> list[tuple]:
    """The rows (memory.search.shortlist_sql) of the `limit` messages of the session with the highest
    summed weight of the looked-up terms they hold (in their text or context), each term counted only
    in messages with an id of at least its lower bound. Aggregated in SQL (memory_search_candidates,
    CANDIDATES_INSTALL), so only the shortlist crosses into Python, in one round trip; with vectors, in
    binary (binary_rows)."""
    queries: list[str] = []
    weights: list[float] = []
    bounds: list[int] = []
    for lookup in lookups:
        tsquery = _tsquery(session_id, lookup.term, lookup.min_id or first_id, max_id, *lookup.index_stats)
        if tsquery is not None:
            queries.append(tsquery)
            weights.append(lookup.weight)
            bounds.append(lookup.min_id)
    if not queries:
        return []
    sql = shortlist_sql(
        "memory_search_candidates(%s::text[], %s::float8[], %s::bigint[], %s, %s) AS c(id)",
        vectors_before=vectors_before,
    )
    params = [queries, weights, bounds, max_id, limit, session_id]
    if vectors_before is not None:
        return binary_rows(sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# The word lookup as a function (memory 0007). Each term is one branch of a UNION ALL: the messages its
# tsquery matches (the prefix scopes its lexemes to the session, and the blocks keep a common term's
# lists short), with the id bound as a filter on the few rows they point to (`id + 0` keeps the planner
# from ANDing them with a primary-key range, whose bitmap can cost more than the lists). The query is
# written out with its values (EXECUTE: planned for them, every call) because its shape depends on the
# number of terms.
#
# Little work, which the planner cannot know: it guesses the length of a block list it
# has no statistics for (most of them) at a fraction of the table, and with enough blocks or'ed picks a
# scan of the whole table, parallel workers or JIT compilation; the function's `SET` clauses turn them
# off for its own statements and are put back when it returns, whatever happens. Settings in a
# transaction of its own cost the search four round trips (begin, set, query, commit) instead of one.
# The weights are passed as a parameter (exact, whatever extra_float_digits says); the tsqueries are
# written out, so that the planner sees their lexemes. Migration 0007 carries its own copy of this text:
# a change here needs a migration of its own (with the new text) to reach any database.
CANDIDATES_INSTALL = [
    """CREATE OR REPLACE FUNCTION memory_search_candidates(
            queries text[], weights float8[], bounds bigint[], max_id bigint, most integer)
        RETURNS SETOF bigint LANGUAGE plpgsql STABLE ROWS 200
        SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off AS $$
        DECLARE
            parts text[] := '{}';
        BEGIN
            FOR i IN 1 .. coalesce(array_length(queries, 1), 0) LOOP
                parts := parts || format(
                    'SELECT id, $1[%s] AS weight FROM memory_message_search WHERE vector @@ %L::tsquery%s',
                    i, queries[i],
                    CASE WHEN bounds[i] > 0
                        THEN format(' AND id + 0 BETWEEN %s AND %s', bounds[i], max_id) ELSE '' END);
            END LOOP;
            IF cardinality(parts) = 0 THEN
                RETURN;
            END IF;
            RETURN QUERY EXECUTE 'SELECT id FROM (' || array_to_string(parts, ' UNION ALL ')
                || ') AS matches GROUP BY id ORDER BY sum(weight) DESC, id DESC LIMIT ' || most
                USING weights;
        END $$""",
]

CANDIDATES_UNINSTALL = [
    "DROP FUNCTION IF EXISTS memory_search_candidates(text[], float8[], bigint[], bigint, integer)",
]
