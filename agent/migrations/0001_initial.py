"""The agent's models, over the tables conversations 0012 renamed for it: state only, no table is
created. Their content types move with them, so that the permissions staff were given on them and
the admin's history of them stay theirs."""

import re

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MOVED = ["scheduledprompt", "scheduledrun", "ratecounter", "idempotencykey"]


def _content_types_relabelled(apps, schema_editor, *, source, target):
    """The content type of each moved model from `source`'s label to `target`'s, unless `target` has one
    already (it is the one in use then, and `remove_stale_contenttypes` removes the other)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    content_types = ContentType.objects.using(schema_editor.connection.alias)
    for model in MOVED:
        if not content_types.filter(app_label=target, model=model).exists():
            content_types.filter(app_label=source, model=model).update(app_label=target)
    ContentType.objects.clear_cache()


def content_types_to_agent(apps, schema_editor):
    _content_types_relabelled(apps, schema_editor, source="conversations", target="agent")


def content_types_to_conversations(apps, schema_editor):
    _content_types_relabelled(apps, schema_editor, source="agent", target="conversations")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0012_agent_tables_to_agent'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='RateCounter',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=200)),
                        ('window_start', models.DateTimeField()),
                        ('count', models.PositiveIntegerField(default=0)),
                    ],
                    options={
                        'indexes': [models.Index(fields=['window_start'], name='rate_counter_window_start')],
                        'constraints': [models.UniqueConstraint(fields=('key', 'window_start'), name='rate_counter_unique_window')],
                    },
                ),
                migrations.CreateModel(
                    name='ScheduledPrompt',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('chat_id', models.CharField(default='main', max_length=64, validators=[django.core.validators.RegexValidator(re.compile('^[A-Za-z0-9_.:-]{1,64}$'), 'A chat id is 1–64 characters of A-Z a-z 0-9 _ . : -')])),
                        ('text', models.TextField()),
                        ('next_run_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                        ('every_seconds', models.PositiveIntegerField(blank=True, help_text='Empty: run once.', null=True)),
                        ('enabled', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('last_run_at', models.DateTimeField(blank=True, null=True)),
                        ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.agent')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scheduled_prompts', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'constraints': [models.CheckConstraint(condition=models.Q(('every_seconds__isnull', True), ('every_seconds__gte', 60), _connector='OR'), name='schedule_every_minute_or_more')],
                    },
                ),
                migrations.CreateModel(
                    name='ScheduledRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('due_at', models.DateTimeField()),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('done', 'Done'), ('failed', 'Failed')], default='pending', max_length=16)),
                        ('detail', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('prompt', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.message')),
                        ('schedule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='agent.scheduledprompt')),
                    ],
                    options={
                        'constraints': [models.UniqueConstraint(fields=('schedule', 'due_at'), name='scheduled_run_once_per_due_time')],
                    },
                ),
                migrations.CreateModel(
                    name='IdempotencyKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=255)),
                        ('response', models.JSONField(null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('prompt', models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.message')),
                        ('session', models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.session')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'constraints': [models.UniqueConstraint(fields=('user', 'key'), name='idempotency_unique_user_key')],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_to_agent, content_types_to_conversations),
    ]
