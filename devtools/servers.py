"""Real server processes for tests: daphne (and the task worker) on a free port, against the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings_dict: dict[str, Any]) -> str:
    """A DATABASE_URL (as settings.py reads it) that points at the database of `settings_dict`."""
    engine = settings_dict["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = str(settings_dict["NAME"])
        if name in {"", ":memory:"} or name.startswith("file:"):
            raise RuntimeError("a server process needs a file SQLite test database")
        return f"sqlite:///{name}"
    if engine.startswith("django.db.backends.postgresql") or engine == "buddy.postgresql":
        user = settings_dict.get("USER") or ""
        password = settings_dict.get("PASSWORD") or ""
        auth = ""
        if user:
            auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
        host = settings_dict.get("HOST") or "127.0.0.1"
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(str(settings_dict['NAME']), safe='')}"
    raise RuntimeError(f"no DATABASE_URL for engine {engine}")


def current_database_url() -> str:
    """The URL of the database this test runs on (the test database), for a subprocess."""
    return database_url(connection.settings_dict)


def server_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": current_database_url(),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def buddy_server_start(port: int, env: dict[str, str], log: Any, **popen: Any) -> subprocess.Popen:
    """`python -m buddy.server` (the bounded daphne `make run` serves with) on 127.0.0.1:`port`, its
    output into the open file `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "buddy.server", "-b", "127.0.0.1", "-p", str(port), "buddy.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        **popen,
    )


def buddy_server_stop(process: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a server started by `buddy_server_start`: terminate, then kill if it does not exit in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


@contextmanager
def daphne(**env: str):
    """A daphne process serving buddy.asgi on a free port; yields its base URL, stops it after."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="daphne-", suffix=".log", delete=False)  # noqa: SIM115
    process = buddy_server_start(port, server_env(**env), log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log_path=Path(log.name))
        yield url
    finally:
        buddy_server_stop(process)
        output = Path(log.name).read_text(errors="replace")
        if "Traceback" in output:
            print(f"daphne on {url} logged:\n{output[-5000:]}")  # shown by pytest when the test fails
        log.close()
        Path(log.name).unlink(missing_ok=True)


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 60, log_path: Path | None = None) -> None:
    """Until `url`/healthz answers 200; a process that exits or never answers raises, with its log."""

    def log_tail() -> str:
        return f":\n{log_path.read_text(errors='replace')[-4000:]}" if log_path else ""

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}{log_tail()}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"daphne did not answer {url}/healthz within {timeout} s{log_tail()}")
