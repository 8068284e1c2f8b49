"""PostgreSQL: the queries of semantic search's window as functions with their own planner settings
(memory/semantic/postgres.py): one round trip each instead of four. SQLite needs nothing."""

from django.db import migrations


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from memory.semantic import postgres

    with schema_editor.connection.cursor() as cursor:
        for statement in postgres.INSTALL:
            cursor.execute(statement)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from memory.semantic import postgres

    with schema_editor.connection.cursor() as cursor:
        for statement in postgres.UNINSTALL:
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_message_vectors")]

    operations = [migrations.RunPython(install, uninstall)]
