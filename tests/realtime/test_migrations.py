"""RelayedFrame moved from the canvas app to realtime (canvas 0004, realtime 0001): the rows a database
holds when it is migrated stay, with their ids, under the new table name, and its content type moves
with it; migrating back gives the old table its rows again. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.apps import _search_triggers_ensure
from realtime.models import RelayedFrame

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("canvas", "0003_relayed_frames"), ("realtime", None)]


def _tables() -> set[str]:
    return set(connection.introspection.table_names())


def test_relayed_frames_keep_their_rows_through_the_move_and_back():
    executor = MigrationExecutor(connection)
    after = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        executor.loader.build_graph()
        old_apps = executor.loader.project_state([BEFORE[0], ("contenttypes", "0002_remove_content_type_name")]).apps
        OldFrame = old_apps.get_model("canvas", "RelayedFrame")
        ContentType = old_apps.get_model("contenttypes", "ContentType")
        assert "canvas_relayedframe" in _tables() and "realtime_relayedframe" not in _tables()
        rows = [
            OldFrame.objects.create(group=f"chat.1.1.g{i}", message={"type": "frame", "frame": {"n": i}})
            for i in range(3)
        ]
        ContentType.objects.filter(app_label="realtime", model="relayedframe").delete()
        content_type, _ = ContentType.objects.get_or_create(app_label="canvas", model="relayedframe")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        _search_triggers_ensure()  # as `migrate` does: SQLite drops the search triggers of rebuilt tables

    assert "realtime_relayedframe" in _tables() and "canvas_relayedframe" not in _tables()
    assert sorted(RelayedFrame.objects.values_list("id", "group", "message")) == [
        (row.id, row.group, row.message) for row in rows
    ]
    from django.contrib.contenttypes.models import ContentType as LiveContentType

    moved = LiveContentType.objects.get(pk=content_type.pk)
    assert (moved.app_label, moved.model) == ("realtime", "relayedframe")
    RelayedFrame.objects.create(group="chat.1.1.new", message={})  # the id sequence goes on

    # And back: the canvas app's table has every row again.
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        assert "canvas_relayedframe" in _tables()
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM canvas_relayedframe")
            assert cursor.fetchone()[0] == 4
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        _search_triggers_ensure()
