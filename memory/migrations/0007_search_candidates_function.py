"""PostgreSQL: the word lookup's query as a function with its own planner settings
(see memory/search/postgres.py): one round trip instead of four. SQLite needs nothing."""

from django.db import migrations

INSTALL = [
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


UNINSTALL = [
    """DROP FUNCTION IF EXISTS memory_search_candidates(text[], float8[], bigint[], bigint, integer)""",
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
    dependencies = [("memory", "0006_vector_window_functions")]

    operations = [migrations.RunPython(_run(INSTALL), _run(UNINSTALL))]
