"""An Idempotency-Key's first answer says what it was by its shape (a reply, or `{"detail": ...}` when
the model failed); the archive keeps no HTTP status."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0009_session_title'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='idempotencykey',
            name='status_code',
        ),
    ]
