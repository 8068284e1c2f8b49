"""A chat model call records the prompt of the turn it served; the calls made before are matched to the
latest turn start of their chat written before them (the turn they served, as turns never interleave)."""

from django.db import migrations, models

BACKFILL = """
UPDATE conversations_modelcall SET prompt_message_id = (
    SELECT MAX(message.id) FROM conversations_message AS message
    WHERE message.session_id = conversations_modelcall.session_id
      AND message.is_turn_start
      AND message.created_at <= conversations_modelcall.created_at
)
WHERE kind = 'chat'
"""


class Migration(migrations.Migration):
    dependencies = [("conversations", "0013_session_summary_lease_to_memory")]

    operations = [
        migrations.AddField(
            model_name="modelcall",
            name="prompt_message_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
