"""PostgreSQL: the queries of semantic search's window as functions with their own planner settings
(see memory/semantic/postgres.py): one round trip each instead of four. SQLite needs nothing."""

from django.db import migrations

INSTALL = [
    """CREATE OR REPLACE FUNCTION memory_vectors_after(chat bigint, after bigint, most integer)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE sql STABLE SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off SET plan_cache_mode = force_custom_plan SET enable_indexscan = off SET enable_bitmapscan = on AS $$
            SELECT v.message_id, v.vector FROM memory_messagevector AS v
            WHERE v.session_id = chat AND v.message_id > after ORDER BY v.message_id DESC LIMIT most
        $$""",
    """CREATE OR REPLACE FUNCTION memory_vectors_count(chat bigint, first bigint)
        RETURNS TABLE (count bigint, total numeric) LANGUAGE sql STABLE SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off SET plan_cache_mode = force_custom_plan SET enable_indexscan = on SET enable_bitmapscan = off AS $$
            SELECT count(*), sum(v.message_id) FROM memory_messagevector AS v
            WHERE v.session_id = chat AND v.message_id >= first
        $$""",
    """CREATE OR REPLACE FUNCTION memory_vectors_window(chat bigint, size integer)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE plpgsql VOLATILE SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off SET plan_cache_mode = force_custom_plan SET enable_indexscan = on SET enable_bitmapscan = off AS $$
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


UNINSTALL = [
    """DROP FUNCTION IF EXISTS memory_vectors_window(bigint, integer)""",
    """DROP FUNCTION IF EXISTS memory_vectors_count(bigint, bigint)""",
    """DROP FUNCTION IF EXISTS memory_vectors_after(bigint, bigint, integer)""",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_message_vectors")]

    operations = [migrations.RunPython(_run(INSTALL), _run(UNINSTALL))]
