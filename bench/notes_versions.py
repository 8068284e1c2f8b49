"""Note versions under a flood of edits: how many are kept, the database's size, and the largest
`GET /memory/notes/versions` body (docs/security.md).

    .venv/bin/python bench/notes_versions.py                  # 120 s of edits on a fresh SQLite file
    .venv/bin/python bench/notes_versions.py --seconds 30 --writers 2
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_notes .venv/bin/python bench/notes_versions.py

One served Buddy (`python -m buddy.server`, as `make run` serves) on loopback; `--writers` threads PUT
one note over and over for `--seconds`, each text 8 KiB (the most a note holds) and different from the
last, with a bearer token. Then: the versions stored, the database's size (the SQLite file and its WAL,
or PostgreSQL's database size), the bodies of the versions' first page at the default `limit` and at
the most (50), and the server's peak resident memory after six of the largest pages at once. The SQLite
file is made anew; on PostgreSQL each run has a user of its own (use a fresh database for the size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
SQLITE_FILE = BENCH_DIR / "notes_versions.sqlite3"
PATH = "/memories/flood.md"
NOTE_BYTES = 8 * 1024

sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
os.environ["DJANGO_DEBUG"] = "0"
os.environ["BUDDY_LLM"] = "offline"
if not os.environ.get("DATABASE_URL"):
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{SQLITE_FILE}{suffix}").unlink(missing_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{SQLITE_FILE}"

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from conversations.services import session_get_or_create  # noqa: E402
from conversations.tokens import api_token_create  # noqa: E402
from devtools.servers import buddy_server_start, buddy_server_stop, free_port, wait_until_up  # noqa: E402
from memory.models import NoteVersion  # noqa: E402


def database_bytes() -> int:
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(Path(f"{SQLITE_FILE}{suffix}").stat().st_size for suffix in ("", "-wal"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return cursor.fetchone()[0]


def request(url: str, token: str, method: str = "GET", body: dict | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with urllib.request.urlopen(
        urllib.request.Request(url, data=data, method=method, headers=headers), timeout=60
    ) as answer:
        return answer.read()


def flood(base: str, token: str, writer: int, until: float, counts: list[int]) -> None:
    number = 0
    while time.monotonic() < until:
        text = f"{writer}:{number}:".ljust(NOTE_BYTES, "x")
        request(f"{base}/memory/notes", token, "PUT", {"scope": "chat", "path": PATH, "content": text})
        number += 1
    counts[writer] = number


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(username=f"bench-notes-{time.time_ns()}")
    session_get_or_create(user=user, agent_slug=None, chat_id="main")
    token = api_token_create(user=user)
    empty = database_bytes()
    connection.close()

    port = free_port()
    log_path = BENCH_DIR / "notes_versions-server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BUDDY_PROMPTS_PER_MINUTE": "0"}
    with open(log_path, "w") as log:
        server = buddy_server_start(port, env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base, server, log_path=log_path)
        counts = [0] * args.writers
        until = time.monotonic() + args.seconds
        threads = [threading.Thread(target=flood, args=(base, token, w, until, counts)) for w in range(args.writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        query = f"{base}/memory/notes/versions?scope=chat&path={PATH}"
        default_page = len(request(query, token))
        largest_page = len(request(f"{query}&limit=50", token))
        pages = [threading.Thread(target=request, args=(f"{query}&limit=50", token)) for _ in range(6)]
        started = time.monotonic()
        for thread in pages:
            thread.start()
        for thread in pages:
            thread.join()
        six_pages = time.monotonic() - started
        rss = peak_rss_mib(server.pid)
    finally:
        buddy_server_stop(server)
    print(f"database: {connection.vendor}; {args.writers} writers for {args.seconds:.0f} s")
    print(f"edits accepted: {sum(counts):,} ({sum(counts) / args.seconds:,.0f}/s)")
    print(f"versions stored: {NoteVersion.objects.filter(user=user).count():,}")
    print(f"database size: {empty / 2**20:.2f} MiB empty, {database_bytes() / 2**20:.2f} MiB after")
    print(f"GET versions body: {default_page / 1024:.0f} KiB (default page), {largest_page / 1024:.0f} KiB (limit=50)")
    print(f"six limit=50 pages at once: {six_pages:.2f} s; server peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
