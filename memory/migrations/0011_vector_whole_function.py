"""PostgreSQL: the query of all of a small chat's vectors as a function with its own planner settings
(see memory/semantic/postgres.py). SQLite needs nothing."""

from django.db import migrations

INSTALL = [
    """CREATE OR REPLACE FUNCTION memory_vectors_whole(chat bigint)
        RETURNS TABLE (id bigint, packed bytea) LANGUAGE sql STABLE SET jit = off SET max_parallel_workers_per_gather = 0 SET enable_seqscan = off SET plan_cache_mode = force_custom_plan SET enable_indexscan = off SET enable_bitmapscan = on AS $$
            SELECT v.message_id, v.vector FROM memory_messagevector AS v WHERE v.session_id = chat
        $$""",
]


UNINSTALL = [
    """DROP FUNCTION IF EXISTS memory_vectors_whole(bigint)""",
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
    dependencies = [("memory", "0010_notes")]

    operations = [migrations.RunPython(_run(INSTALL), _run(UNINSTALL))]
