"""A scheduled run's lease: the worker running it renews it; a run whose worker died is queued again
once it expires (agent.tasks). `queued_at`: when it was last handed to the task queue."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent', '0002_summary_task_in_agent'),
    ]

    operations = [
        migrations.AddField(
            model_name='scheduledrun',
            name='lease_expires_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='scheduledrun',
            name='lease_id',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
        migrations.AddField(
            model_name='scheduledrun',
            name='queued_at',
            field=models.DateTimeField(blank=True, default=django.utils.timezone.now, null=True),
        ),
        migrations.AddIndex(
            model_name='scheduledrun',
            index=models.Index(fields=['status'], name='scheduled_run_status'),
        ),
    ]
