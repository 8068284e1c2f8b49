"""RelayedFrame now belongs to the realtime app (realtime 0001 renamed its table and keeps its rows):
only the canvas app's state forgets it here; the database is left as realtime 0001 made it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("canvas", "0003_relayed_frames"),
        ("realtime", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RelayedFrame")],
            database_operations=[],
        ),
    ]
