"""What the index backends (memory.search.postgres, memory.search.sqlite) and the ranking
(memory.search) share: a query term as the backends look it up, and the query of a shortlist's rows."""

from __future__ import annotations

from dataclasses import dataclass

from textsearch.speakers import LABEL_CHARS


@dataclass(frozen=True)
class Lookup:
    """One query term as the index backends look it up: its matches with an id of at least `min_id`
    (0: all), each worth `weight`; `index_stats` holds the backend's own statistics of the term (the
    columns it names in TERM_COLUMNS)."""

    term: str
    min_id: int
    weight: float
    index_stats: tuple = ()


# What ranking reads of a candidate (the message `t`, its search document `d`): its terms and context
# for BM25F, its time for the date cue, and the start of its text for the speaker cue.
ROW_COLUMNS = f"t.id, d.terms, d.context, t.created_at, substr(d.text, 1, {LABEL_CHARS})"
# The message joined with its search document, for ROW_COLUMNS.
ROW_TABLES = "conversations_message AS t JOIN memory_searchdocument AS d ON d.message_id = t.id"


def shortlist_sql(candidates: str, *, vectors_before: int | None) -> str:
    """The query of a shortlist's rows, for the index backends: `candidates` is a FROM item (alias
    `c`, column `id`) that the backend writes; the rows are ROW_COLUMNS of each message, with
    `vectors_before` the packed semantic vector of those with a smaller id (else NULL). The last
    parameter is the session's id."""
    vector, join = "NULL", ""
    if vectors_before is not None:
        vector = "v.vector"
        # The bound on the vector's own key, not on t.id: both become conditions of the index scan, and
        # for a candidate inside the window (its id = the key, but the key < the window start) they
        # contradict each other, so PostgreSQL reads nothing, instead of fetching the vector and
        # dropping it in a join filter (up to 200 lookups a search).
        join = f" LEFT JOIN memory_messagevector AS v ON v.message_id = t.id AND v.message_id < {int(vectors_before)}"
    return (
        f"SELECT {ROW_COLUMNS}, {vector} FROM {candidates}"
        " JOIN conversations_message AS t ON t.id = c.id JOIN memory_searchdocument AS d ON d.message_id = c.id"
        f"{join} WHERE t.session_id = %s"
    )
