"""A session's summary job lease is memory's now (memory 0014 carried every lease over first)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0012_agent_tables_to_agent'),
        ('memory', '0014_summary_lease'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='session',
            name='summary_lease_expires_at',
        ),
    ]
