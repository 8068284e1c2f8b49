"""The sessions' search statistics also keep the sum of their messages' token estimates, so that
`GET /memory/stats` reads a chat's totals instead of counting its archive (agent.stats)."""

from django.db import migrations


def upgrade(apps, schema_editor):
    from memory.search import postgres, sqlite

    backend = postgres if schema_editor.connection.vendor == "postgresql" else sqlite
    with schema_editor.connection.cursor() as cursor:
        backend.session_tokens_add(cursor)


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_vector_index")]

    # Going back leaves the column: the triggers of every earlier migration's design keep it too.
    operations = [migrations.RunPython(upgrade, migrations.RunPython.noop)]
