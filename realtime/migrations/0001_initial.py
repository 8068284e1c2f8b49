"""RelayedFrame moves from the canvas app to this one, rows and all.

The table is renamed (canvas_relayedframe → realtime_relayedframe) rather than kept under its old name:
the table then carries the name Django gives a realtime model, so nothing needs a `db_table` that a
reader would have to explain. A rename keeps every row on SQLite and PostgreSQL (no copy), and its
index keeps working under its old name. The model's content type moves with it, so permissions that
point at it stay valid. canvas 0004 drops the model from the canvas app's state.
"""

import django.utils.timezone
from django.db import migrations, models


def _content_type_move(apps, schema_editor, *, source, target):
    content_type = apps.get_model("contenttypes", "ContentType")
    old = content_type.objects.filter(app_label=source, model="relayedframe")
    if content_type.objects.filter(app_label=target, model="relayedframe").exists():
        old.delete()
    else:
        old.update(app_label=target)


def content_type_forward(apps, schema_editor):
    _content_type_move(apps, schema_editor, source="canvas", target="realtime")


def content_type_backward(apps, schema_editor):
    _content_type_move(apps, schema_editor, source="realtime", target="canvas")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("canvas", "0003_relayed_frames"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RelayedFrame",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("group", models.CharField(max_length=100)),
                        ("message", models.JSONField()),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                    ],
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE canvas_relayedframe RENAME TO realtime_relayedframe",
                    reverse_sql="ALTER TABLE realtime_relayedframe RENAME TO canvas_relayedframe",
                ),
            ],
        ),
        migrations.RunPython(content_type_forward, content_type_backward),
    ]
