from django.db import migrations, models


def fill_search_terms(apps, schema_editor):
    """Compute the index terms of the messages archived before search existed, in archive order,
    each with the terms of the message before it in its session as context."""
    from memory.search.text import context_terms, index_terms, join_terms, split_terms

    Message = apps.get_model("conversations", "Message")
    previous_terms: dict[int, str] = {}
    batch = []
    for message in Message.objects.order_by("id").only("id", "session_id", "search_text").iterator(chunk_size=2000):
        message.search_terms = join_terms(index_terms(message.search_text))
        message.search_context = join_terms(context_terms(split_terms(previous_terms.get(message.session_id, ""))))
        previous_terms[message.session_id] = message.search_terms
        batch.append(message)
        if len(batch) >= 2000:
            Message.objects.bulk_update(batch, ["search_terms", "search_context"])
            batch = []
    if batch:
        Message.objects.bulk_update(batch, ["search_terms", "search_context"])


class Migration(migrations.Migration):
    dependencies = [("conversations", "0002_default_agent")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_terms",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.AddField(
            model_name="message",
            name="search_context",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill_search_terms, migrations.RunPython.noop),
    ]
