"""A model call outlives its chat: deleting a chat keeps its calls' token counts for cost reporting,
so the call's session may be null and the call names its user itself (filled from its session)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

BACKFILL = """
UPDATE conversations_modelcall SET user_id = (
    SELECT session.user_id FROM conversations_session AS session
    WHERE session.id = conversations_modelcall.session_id
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0016_modelcall_prompt_message"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="modelcall",
            name="session",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="model_calls",
                to="conversations.session",
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="user",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
