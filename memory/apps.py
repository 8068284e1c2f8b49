from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate

from embeddings import encoder


def _search_triggers_ensure(using: str = "default", **kwargs) -> None:
    """SQLite drops a table's triggers when Django's schema editor rebuilds the table (AlterField on
    conversations_message): put the index's triggers back after every migrate. Idempotent."""
    from django.db import connections

    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    from memory.search import sqlite  # not at the top: apps.py is imported before the models are ready

    with connection.cursor() as cursor:
        # The index's design of today is installed only once memory 0016 has run: not while migrated
        # backwards (or not yet), when the triggers are those of that migration's time.
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('memory_message_fts', 'memory_searchdocument')"
        )
        if cursor.fetchone()[0] < 2:
            return
        # The term rows' owners (memory 0017): not while migrated back before it.
        cursor.execute("SELECT count(*) FROM pragma_table_info('memory_search_term') WHERE name = 'user_id'")
        owners = cursor.fetchone()[0] > 0
        for statement in sqlite.INSTALL:
            if owners or statement not in sqlite.OWNER_INSTALL:
                cursor.execute(statement)


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Not at the top: these modules need the models, which are not ready when apps.py is imported.
        from conversations.services import message_indexing_register
        from memory import checks  # noqa: F401  (registers the system checks)
        from memory.search.documents import documents_write

        message_indexing_register(index=documents_write)
        # The sentence encoder (a plain package) finds its model where the settings say, read on each use.
        encoder.model_source(lambda: settings.BUDDY_EMBEDDING_MODEL)
        post_migrate.connect(_search_triggers_ensure, sender=self, dispatch_uid="memory_search_triggers")
