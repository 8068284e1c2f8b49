"""PostgreSQL: the query of all of a small chat's vectors as a function with its own planner settings
(memory/semantic/postgres.py, WHOLE_INSTALL). SQLite needs nothing."""

from django.db import migrations

from memory.migrations._postgres import statements


class Migration(migrations.Migration):
    dependencies = [("memory", "0010_notes")]

    operations = [
        migrations.RunPython(
            statements("memory.semantic.postgres", "WHOLE_INSTALL"),
            statements("memory.semantic.postgres", "WHOLE_UNINSTALL"),
        )
    ]
