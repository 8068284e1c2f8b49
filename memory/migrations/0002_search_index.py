"""The history search index: FTS5 on SQLite, a tsvector side table with a GIN index on PostgreSQL.

Both are built from `Message.search_terms` and `Message.search_context` (conversations 0003) and kept in
sync by triggers, so every way of writing messages (save, bulk_create, COPY) is indexed. The SQL lives
beside the code that queries it (memory/search/sqlite.py, postgres.py), so this installs the current
design; 0003 upgrades a database that this migration built with the first PostgreSQL design.
"""

from django.db import migrations


def _statements(vendor, name):
    from memory.search import postgres, sqlite

    module = {"sqlite": sqlite, "postgresql": postgres}.get(vendor)
    return getattr(module, name) if module else []


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in _statements(vendor, "INSTALL") + _statements(vendor, "BACKFILL"):
        schema_editor.execute(statement, params=None)


def uninstall(apps, schema_editor):
    for statement in _statements(schema_editor.connection.vendor, "UNINSTALL"):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0001_initial"),
        ("conversations", "0005_message_search_terms"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
