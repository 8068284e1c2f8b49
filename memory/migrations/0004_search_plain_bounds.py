"""PostgreSQL: the term statistics record where each term's plain posting list ends (`plain_last`) and
its newest match (`last_id`), so that a bounded lookup of a common term skips its plain list when the
bound lies past it (see memory/search/postgres.py).

A database built before is rebuilt here: the triggers, side table and statistics are dropped and
refilled from the archive, and the GIN index is built again. A database that 0002 or 0003 built with
the current design is left alone, and so is SQLite.
"""

from django.db import migrations


def upgrade(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from memory.search import postgres

    with schema_editor.connection.cursor() as cursor:
        if postgres.terms_bounded(cursor):
            return
        postgres.rebuild(cursor)


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_search_side_table")]

    # Going back leaves the new columns: every earlier migration installs the current design too.
    operations = [migrations.RunPython(upgrade, migrations.RunPython.noop)]
