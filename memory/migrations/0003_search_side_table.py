"""PostgreSQL: move the search tsvector from a generated column of conversations_message to the narrow
side table memory_message_search (see memory/search/postgres.py for why).

A database migrated with the first design of 0002 is rebuilt here: the old column, index, triggers
and statistics are dropped, the side table and statistics are filled from the archive and the GIN
index is built. A database that 0002 created with the side table already is left alone, and so is
SQLite.
"""

from django.db import migrations


def upgrade(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from memory.search import postgres

    with schema_editor.connection.cursor() as cursor:
        if not postgres.first_design_installed(cursor):
            return
        postgres.rebuild(cursor)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_search_index")]

    # Going back leaves the side table: memory 0002 installs the current design too.
    operations = [migrations.RunPython(upgrade, migrations.RunPython.noop)]
