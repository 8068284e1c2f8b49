"""The agent's tables move to the agent app (agent 0001 takes over their models): scheduled prompts,
their runs, rate counters and idempotency keys. Every row stays where it is; each table is renamed
to the agent's name. A rename is one change to the catalogue on both databases: PostgreSQL's foreign
keys point at the table itself, and SQLite (3.26 and later) rewrites the foreign keys of the tables
that name it (agent_scheduledrun → agent_scheduledprompt)."""

from django.db import migrations

MOVED = ["scheduledrun", "scheduledprompt", "ratecounter", "idempotencykey"]


class Migration(migrations.Migration):
    dependencies = [("conversations", "0010_idempotencykey_no_status")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AlterModelTable(name=name, table=f"agent_{name}") for name in MOVED],
            state_operations=[migrations.DeleteModel(name=name) for name in MOVED],
        )
    ]
