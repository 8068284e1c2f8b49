"""SQLite backend: an FTS5 index of session-namespaced terms, kept in sync by triggers.

The index holds, for every message's search document (memory.models.SearchDocument), the terms of its
own text and of its context (the message before it), each prefixed with the session id (`12_price`):
a term's posting list then holds one session's messages only, so a search never reads another
conversation's postings. `detail=none`
keeps only which messages hold a term; ranking needs nothing more from the index (see
memory.search). The `ascii` tokenizer splits on ASCII punctuation and spaces only, so the terms we
hand it (letters and digits, any script) come back exactly as given.

Per-session statistics (message count, term counts, document frequencies) live in two plain tables
maintained by the same triggers; ranking reads them instead of counting postings.
"""

from __future__ import annotations

from django.db import connection

from memory.search.shortlist import Lookup, shortlist_sql
from textsearch.text import index_prefix


def _prefixed(row: str) -> str:
    """SQL for the session-prefixed terms of a search document row (`new` or `old`), '' when it has none."""
    terms = f"trim({row}.terms || ' ' || {row}.context)"
    return (
        f"CASE WHEN {terms} = '' THEN '' ELSE {row}.session_id || '_' || "
        f"replace({terms}, ' ', ' ' || {row}.session_id || '_') END"
    )


def _count(column: str) -> str:
    return f"(length({column}) - length(replace({column}, ' ', '')) + ({column} != ''))"


def _json_terms(column: str) -> str:
    # Terms are letters and digits only, so quoting them makes a valid JSON array for json_each().
    return f"""json_each('["' || replace({column}, ' ', '","') || '"]')"""


def _on_insert(row: str) -> str:
    return f"""
    INSERT INTO memory_message_fts(rowid, terms)
        SELECT {row}.message_id, {_prefixed(row)} WHERE {_prefixed(row)} != '';
    INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        VALUES ({row}.session_id, 1, {_count(row + ".terms")}, {_count(row + ".context")},
                {row}.message_id, {row}.message_id, {row}.tokens)
        ON CONFLICT(session_id) DO UPDATE SET messages = messages + 1, tokens = tokens + excluded.tokens,
            first_id = min(first_id, excluded.first_id), last_id = max(last_id, excluded.last_id),
            body_terms = body_terms + excluded.body_terms,
            context_terms = context_terms + excluded.context_terms;
    INSERT INTO memory_search_term(session_id, term, df)
        SELECT DISTINCT {row}.session_id, value, 1 FROM {_json_terms(row + ".terms")}
        WHERE {row}.terms != ''
        ON CONFLICT(session_id, term) DO UPDATE SET df = df + 1;"""


def _on_delete(row: str) -> str:
    return f"""
    INSERT INTO memory_message_fts(memory_message_fts, rowid, terms)
        SELECT 'delete', {row}.message_id, {_prefixed(row)} WHERE {_prefixed(row)} != '';
    UPDATE memory_search_session SET messages = messages - 1, tokens = tokens - {row}.tokens,
        body_terms = body_terms - {_count(row + ".terms")},
        context_terms = context_terms - {_count(row + ".context")}
        WHERE session_id = {row}.session_id;
    UPDATE memory_search_term SET df = df - 1 WHERE session_id = {row}.session_id
        AND term IN (SELECT value FROM {_json_terms(row + ".terms")});"""


CONTENT_VIEW = "memory_message_fts_content"

# The owner of each chat's term rows (memory_search_term.user_id, memory 0017): search across a user's
# chats (memory.search.across) reads a term's chats on the (user, term) index instead of probing every
# chat. A new term row takes its chat's user; a chat given to another user moves its rows with it.
# Memory 0017 carries its own copy.
OWNER_INDEX = """CREATE INDEX IF NOT EXISTS memory_search_term_user ON memory_search_term (user_id, term, df DESC)"""
OWNER_INSTALL = [
    OWNER_INDEX,
    """CREATE TRIGGER IF NOT EXISTS memory_search_term_owner AFTER INSERT ON memory_search_term
        WHEN new.user_id IS NULL
        BEGIN
            UPDATE memory_search_term
                SET user_id = (SELECT user_id FROM conversations_session WHERE id = new.session_id)
                WHERE session_id = new.session_id AND term = new.term;
        END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_session_owner AFTER UPDATE OF user_id ON conversations_session
        WHEN old.user_id IS NOT new.user_id
        BEGIN
            UPDATE memory_search_term SET user_id = new.user_id WHERE session_id = new.id;
        END""",
]

# Idempotent: also re-run after every migrate (memory.apps), because SQLite drops a table's triggers
# when Django's schema editor rebuilds that table for an AlterField. Migrations carry their own copies
# (memory 0002, 0009, 0016): a change here needs a migration of its own.
INSTALL = [
    f"""CREATE VIEW IF NOT EXISTS {CONTENT_VIEW} AS
        SELECT d.message_id AS id, {_prefixed("d")} AS terms FROM memory_searchdocument AS d""",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS memory_message_fts USING fts5(
        terms, content='{CONTENT_VIEW}', content_rowid='id', detail='none',
        tokenize="ascii tokenchars '_'")""",
    """CREATE TABLE IF NOT EXISTS memory_search_session (
        session_id integer NOT NULL PRIMARY KEY, messages integer NOT NULL,
        body_terms integer NOT NULL, context_terms integer NOT NULL,
        first_id integer NOT NULL, last_id integer NOT NULL, tokens integer NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS memory_search_term (
        session_id integer NOT NULL, term text NOT NULL, df integer NOT NULL, user_id integer,
        PRIMARY KEY (session_id, term)) WITHOUT ROWID""",
    f"""CREATE TRIGGER IF NOT EXISTS memory_search_document_insert AFTER INSERT ON memory_searchdocument
        BEGIN {_on_insert("new")} END""",
    f"""CREATE TRIGGER IF NOT EXISTS memory_search_document_delete AFTER DELETE ON memory_searchdocument
        BEGIN {_on_delete("old")} END""",
    f"""CREATE TRIGGER IF NOT EXISTS memory_search_document_update
        AFTER UPDATE OF session_id, terms, context ON memory_searchdocument
        BEGIN {_on_delete("old")} {_on_insert("new")} END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_session_delete AFTER DELETE ON conversations_session
        BEGIN
            DELETE FROM memory_search_session WHERE session_id = old.id;
            DELETE FROM memory_search_term WHERE session_id = old.id;
        END""",
    *OWNER_INSTALL,
]

# Index what was archived before the index existed.
BACKFILL = [
    "INSERT INTO memory_message_fts(memory_message_fts) VALUES ('rebuild')",
    f"""INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        SELECT d.session_id, count(*), sum({_count("d.terms")}), sum({_count("d.context")}),
            min(d.message_id), max(d.message_id), sum(d.tokens)
        FROM memory_searchdocument AS d GROUP BY d.session_id""",
    f"""INSERT INTO memory_search_term(session_id, term, df, user_id)
        SELECT d.session_id, t.value, count(DISTINCT d.message_id), s.user_id FROM memory_searchdocument AS d
        JOIN conversations_session AS s ON s.id = d.session_id,
        {_json_terms("d.terms")} AS t WHERE d.terms != '' GROUP BY d.session_id, t.value""",
]

UNINSTALL = [
    "DROP TRIGGER IF EXISTS memory_search_session_owner",
    "DROP TRIGGER IF EXISTS memory_search_term_owner",
    "DROP TRIGGER IF EXISTS memory_search_session_delete",
    "DROP TRIGGER IF EXISTS memory_search_document_update",
    "DROP TRIGGER IF EXISTS memory_search_document_delete",
    "DROP TRIGGER IF EXISTS memory_search_document_insert",
    "DROP TABLE IF EXISTS memory_message_fts",
    f"DROP VIEW IF EXISTS {CONTENT_VIEW}",
    "DROP TABLE IF EXISTS memory_search_term",
    "DROP TABLE IF EXISTS memory_search_session",
]


# The columns of memory_search_term that memory.search hands back in Lookup.index_stats: none, FTS5
# finds a term's matches in an id range by itself.
TERM_COLUMNS = ()


def candidates(
    *, session_id: int, lookups: list[Lookup], first_id: int, max_id: int, limit: int, vectors_before: int | None = None
) -> list[tuple]:
    """The rows (memory.search.shortlist_sql) of the `limit` messages of the session with the highest
    summed weight of the looked-up terms they hold (in their text or context), each term counted only
    in messages with an id of at least its lower bound. Aggregated in SQL, so only the shortlist
    crosses into Python."""
    parts: list[str] = []
    params: list[object] = []
    for lookup in lookups:
        parts.append(
            "SELECT rowid AS id, %s AS weight FROM memory_message_fts"
            " WHERE memory_message_fts MATCH %s AND rowid BETWEEN %s AND %s"
        )
        params += [lookup.weight, '"' + index_prefix(session_id) + lookup.term + '"', lookup.min_id, max_id]
    ranked = (
        f"(SELECT id FROM ({' UNION ALL '.join(parts)}) GROUP BY id ORDER BY sum(weight) DESC, id DESC LIMIT %s) AS c"
    )
    with connection.cursor() as cursor:
        cursor.execute(shortlist_sql(ranked, vectors_before=vectors_before), [*params, limit, session_id])
        return cursor.fetchall()
