"""A note proposal stores the exact changes its confirmation showed instead of the memory command;
a proposal still pending from before cannot be applied as shown, so it fails with a reason. Versions
beyond the newest 50 of each note are pruned, as every write now prunes them."""

from django.db import migrations, models

VERSIONS_KEPT = 50

PENDING_FAIL = """
UPDATE memory_noteproposal
SET status = 'failed',
    outcome = 'Not done: this question was asked before Buddy kept what a question shows. Nothing changed.'
WHERE status = 'pending'
"""

VERSIONS_PRUNE = f"""
DELETE FROM memory_noteversion WHERE id IN (
    SELECT id FROM (
        SELECT id, ROW_NUMBER() OVER (
            PARTITION BY user_id, scope, session_id, path ORDER BY id DESC
        ) AS newer
        FROM memory_noteversion
    ) ranked
    WHERE newer > {VERSIONS_KEPT}
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0014_summary_lease"),
    ]

    operations = [
        migrations.RunSQL(PENDING_FAIL, migrations.RunSQL.noop),
        migrations.RemoveField(model_name="noteproposal", name="command"),
        migrations.AddField(model_name="noteproposal", name="changes", field=models.JSONField(default=list)),
        migrations.RunSQL(VERSIONS_PRUNE, migrations.RunSQL.noop),
    ]
