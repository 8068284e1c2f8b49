"""Shared by memory's migrations (Django loads no migration from a module whose name starts with `_`)."""

import importlib


def statements(module: str, name: str):
    """A RunPython function that runs the SQL statements `module.name` (a list) on PostgreSQL, and
    nothing on SQLite."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            for statement in getattr(importlib.import_module(module), name):
                cursor.execute(statement)

    return run
