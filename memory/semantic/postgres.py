"""PostgreSQL: the window's queries as functions that carry their own planner settings.

The planner takes a chat's ids to be spread over the whole of memory_messagevector (it knows no
correlation between session and id), so for "this chat's newest vectors" it walks the primary key
through every other chat's, the longer the larger the archive. Told not to, it reads the
(session, message) index as meant: alone for ids and counts (an index-only scan), through a bitmap for
rows. Settings in a transaction of their own cost the search four round trips per query (begin, set,
query, commit); a function's `SET` clauses apply to its own statements only and are put back when it
returns, whatever happens, in one round trip. Migrations memory 0006 (INSTALL) and 0011
(WHOLE_INSTALL) carry their own copies: a change here needs a migration of its own.
"""

from __future__ import annotations

from django.db import connection

# Shared by every function: no JIT compilation or parallel workers for queries of a few milliseconds.
# A plan made for each call (plpgsql would switch to a generic plan after five, made without the
# chat's statistics).
_COMMON = (
    "SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off"
    " SET plan_cache_mode = force_custom_plan"
)
_ROWS = f"{_COMMON} SET enable_indexscan = off SET enable_bitmapscan = on"
_INDEX = f"{_COMMON} SET enable_indexscan = on SET enable_bitmapscan = off"

INSTALL = [
    # The vectors of a chat's messages after `after`, newest first, at most `most`.
    f"""CREATE OR REPLACE FUNCTION memory_vectors_after(chat bigint, after bigint, most integer)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE sql STABLE {_ROWS} AS $$
            SELECT v.message_id, v.vector FROM memory_messagevector AS v
            WHERE v.session_id = chat AND v.message_id > after ORDER BY v.message_id DESC LIMIT most
        $$""",
    # How many vectors a chat has from `first` on, and the sum of their ids (an index-only scan).
    f"""CREATE OR REPLACE FUNCTION memory_vectors_count(chat bigint, first bigint)
        RETURNS TABLE (count bigint, total numeric) LANGUAGE sql STABLE {_INDEX} AS $$
            SELECT count(*), sum(v.message_id) FROM memory_messagevector AS v
            WHERE v.session_id = chat AND v.message_id >= first
        $$""",
    # A chat's newest `size` vectors: the oldest of them found in the index alone, then the rows.
    f"""CREATE OR REPLACE FUNCTION memory_vectors_window(chat bigint, size integer)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE plpgsql VOLATILE {_INDEX} AS $$
        DECLARE
            oldest bigint;
        BEGIN
            SELECT v.message_id INTO oldest FROM memory_messagevector AS v WHERE v.session_id = chat
                ORDER BY v.session_id DESC, v.message_id DESC LIMIT 1 OFFSET size - 1;
            PERFORM set_config('enable_indexscan', 'off', true), set_config('enable_bitmapscan', 'on', true);
            RETURN QUERY SELECT v.message_id, v.vector FROM memory_messagevector AS v
                WHERE v.session_id = chat AND v.message_id >= coalesce(oldest, 0);
        END $$""",
]

# All of a chat's vectors, for a chat of at most a window's messages: the window's query without its
# probe for the oldest id kept, which reads the chat's index entries once more.
WHOLE_INSTALL = [
    f"""CREATE OR REPLACE FUNCTION memory_vectors_whole(chat bigint)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE sql STABLE {_ROWS} AS $$
            SELECT v.message_id, v.vector FROM memory_messagevector AS v WHERE v.session_id = chat
        $$""",
]

WHOLE_UNINSTALL = ["DROP FUNCTION IF EXISTS memory_vectors_whole(bigint)"]

UNINSTALL = [
    "DROP FUNCTION IF EXISTS memory_vectors_window(bigint, integer)",
    "DROP FUNCTION IF EXISTS memory_vectors_count(bigint, bigint)",
    "DROP FUNCTION IF EXISTS memory_vectors_after(bigint, bigint, integer)",
]


def binary_rows(sql: str, params: list) -> list[tuple]:
    """The rows of `sql`, received in binary: Django's cursors bind parameters on the client, and
    those receive every value as text — bytea as hex, several times the bytes of a chat's window of
    vectors. A plain psycopg cursor on the same connection (and transaction) takes them in binary. Rows
    of text alone gain nothing from it (server-side binding costs more than it saves): only rows with
    vectors come this way."""
    import psycopg

    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()
