"""PostgreSQL: the queries of semantic search's window as functions with their own planner settings
(memory/semantic/postgres.py): one round trip each instead of four. SQLite needs nothing."""

from django.db import migrations


def _run(name: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        from memory.semantic import postgres

        with schema_editor.connection.cursor() as cursor:
            for statement in getattr(postgres, name):
                cursor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_message_vectors")]

    operations = [migrations.RunPython(_run("INSTALL"), _run("UNINSTALL"))]
