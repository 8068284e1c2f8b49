from django.db import migrations


def create_default_agent(apps, schema_editor):
    Agent = apps.get_model("conversations", "Agent")
    Agent.objects.get_or_create(
        slug="buddy",
        defaults={
            "name": "Buddy",
            "avatar": "🤖",
            "personality": (
                "You are Buddy, a warm, concise assistant. You remember the user's conversation with you "
                "and can show things on the canvas beside the chat."
            ),
        },
    )


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]
    operations = [migrations.RunPython(create_default_agent, migrations.RunPython.noop)]
