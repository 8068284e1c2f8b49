"""A session's summary job lease moves from a column of the session (conversations 0013 drops it) to
memory's own table, beside the vector jobs' leases. A lease held while this runs is carried over
with its expiry, so a summary job still running keeps its session to itself; going back carries
each lease back to its session's column."""

import django.db.models.deletion
from django.db import migrations, models


def leases_to_table(apps, schema_editor):
    Session = apps.get_model("conversations", "Session")
    SummaryLease = apps.get_model("memory", "SummaryLease")
    alias = schema_editor.connection.alias
    held = Session.objects.using(alias).filter(summary_lease_expires_at__isnull=False)
    SummaryLease.objects.using(alias).bulk_create(
        SummaryLease(session_id=session_id, expires_at=expires_at)
        for session_id, expires_at in held.values_list("id", "summary_lease_expires_at").iterator()
    )


def leases_to_sessions(apps, schema_editor):
    Session = apps.get_model("conversations", "Session")
    SummaryLease = apps.get_model("memory", "SummaryLease")
    alias = schema_editor.connection.alias
    for session_id, expires_at in SummaryLease.objects.using(alias).values_list("session_id", "expires_at"):
        Session.objects.using(alias).filter(pk=session_id).update(summary_lease_expires_at=expires_at)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0012_agent_tables_to_agent'),
        ('memory', '0012_vectors_in_eight_bits'),
    ]

    operations = [
        migrations.CreateModel(
            name='SummaryLease',
            fields=[
                ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='conversations.session')),
                ('expires_at', models.DateTimeField()),
            ],
        ),
        migrations.RunPython(leases_to_table, leases_to_sessions),
    ]
