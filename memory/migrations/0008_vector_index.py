"""Counts of indexed messages per chat; the vectors written before are dropped: a message's vector is
now of its text without a speaker label, with a lighter share of the message before it, and the
background jobs (or `manage.py embed_history`) write them again."""

import django.db.models.deletion
from django.db import migrations, models


def drop_vectors(apps, schema_editor):
    apps.get_model("memory", "MessageVector").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0006_message_session_fk_unindexed'),
        ('memory', '0007_search_candidates_function'),
    ]

    operations = [
        migrations.CreateModel(
            name='VectorIndex',
            fields=[
                ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='conversations.session')),
                ('indexed', models.PositiveBigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(drop_vectors, migrations.RunPython.noop),
    ]
