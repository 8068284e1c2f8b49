from django.db import migrations, models


def fill_search_terms(apps, schema_editor):
    """Compute the index terms of the messages archived before search existed, in archive order, each
    with its search context (conversations.services.message_append does the same on every write)."""
    from memory.search.text import index_terms, join_terms, search_context

    Message = apps.get_model("conversations", "Message")
    previous: dict[int, str] = {}  # session id → terms of its latest message
    turn_start: dict[int, str] = {}  # session id → terms of its latest turn start
    batch = []
    messages = Message.objects.order_by("id").only("id", "session_id", "is_turn_start", "search_text")
    for message in messages.iterator(chunk_size=2000):
        session_id = message.session_id
        message.search_terms = join_terms(index_terms(message.search_text))
        if session_id in previous:
            inside_turn = not message.is_turn_start and previous[session_id] is not turn_start.get(session_id)
            message.search_context = search_context(
                previous=previous[session_id], turn_start=turn_start.get(session_id) if inside_turn else None
            )
        previous[session_id] = message.search_terms
        if message.is_turn_start:
            turn_start[session_id] = message.search_terms
        batch.append(message)
        if len(batch) >= 2000:
            Message.objects.bulk_update(batch, ["search_terms", "search_context"])
            batch = []
    if batch:
        Message.objects.bulk_update(batch, ["search_terms", "search_context"])


class Migration(migrations.Migration):
    dependencies = [("conversations", "0004_summary_lease")]

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
