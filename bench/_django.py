"""Shared set-up for benchmarks: Django on a database of the benchmark's own under var/bench/."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"


def fresh_database(name: str, *, postgres: bool, server: str) -> str:
    """An empty database for one benchmark, its URL: `buddy_bench_<name>` on the PostgreSQL `server`
    (dropped and created again), or var/bench/<name>.sqlite3 (its files removed)."""
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    if postgres:
        import psycopg

        with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "buddy_bench_{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "buddy_bench_{name}"')
        return f"{server}/buddy_bench_{name}"
    path = BENCH_DIR / f"{name}.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{path}"


def setup(database_url: str | None = None, **env: str) -> None:
    """Point Django at `database_url` (default: a SQLite file under var/bench/), migrate, and return."""
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    for name, value in env.items():
        os.environ[name] = value
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
