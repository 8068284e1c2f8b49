"""PostgreSQL: the word lookup's query as a function with its own planner settings
(memory/search/postgres.py, CANDIDATES_INSTALL): one round trip instead of four. SQLite needs nothing."""

from django.db import migrations

from memory.migrations._postgres import statements


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_vector_window_functions")]

    operations = [
        migrations.RunPython(
            statements("memory.search.postgres", "CANDIDATES_INSTALL"),
            statements("memory.search.postgres", "CANDIDATES_UNINSTALL"),
        )
    ]
