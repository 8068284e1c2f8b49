"""A message's search text, terms and context are memory's now (memory 0016 copied them into
memory_searchdocument)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0016_modelcall_prompt_message'),
        ('memory', '0016_search_documents'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='message',
            name='search_context',
        ),
        migrations.RemoveField(
            model_name='message',
            name='search_terms',
        ),
        migrations.RemoveField(
            model_name='message',
            name='search_text',
        ),
    ]
