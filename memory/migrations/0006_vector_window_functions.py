"""PostgreSQL: the queries of semantic search's window as functions with their own planner settings
(memory/semantic/postgres.py): one round trip each instead of four. SQLite needs nothing."""

from django.db import migrations

from memory.migrations._postgres import statements


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_message_vectors")]

    operations = [
        migrations.RunPython(
            statements("memory.semantic.postgres", "INSTALL"), statements("memory.semantic.postgres", "UNINSTALL")
        )
    ]
