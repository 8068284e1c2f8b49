"""The summary job's task is the agent's (`agent.tasks.summary_update`, which hands memory the summary
model): a retry of it that django-q2 holds from before calls it there."""

from django.db import migrations

OLD, NEW = "memory.summaries.summary_update", "agent.tasks.summary_update"


def _renamed(apps, schema_editor, *, old, new):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.using(schema_editor.connection.alias).filter(func=old).update(func=new)


def retries_to_agent(apps, schema_editor):
    _renamed(apps, schema_editor, old=OLD, new=NEW)


def retries_to_memory(apps, schema_editor):
    _renamed(apps, schema_editor, old=NEW, new=OLD)


class Migration(migrations.Migration):

    dependencies = [
        ('agent', '0001_initial'),
        ('django_q', '0014_schedule_cluster'),
    ]

    operations = [migrations.RunPython(retries_to_agent, retries_to_memory)]
