"""Two real daphne processes on PostgreSQL and Redis: a canvas change reaches sockets of the other one."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection
from django.test import Client

from agent.canvas import canvas_command_run
from devtools.servers import free_port
from tests.canvas.examples import ADD_EXAMPLES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]


def _wait_listening(port: int, process: subprocess.Popen, log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"daphne on {port} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"daphne on {port} did not listen in time:\n{log.read_text()[-3000:]}")


@pytest.fixture
def daphne_ports(transactional_db, tmp_path, settings):
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("needs REDIS_URL and a PostgreSQL DATABASE_URL")
    # The servers share this run's test database and a channel prefix of their own with this process,
    # so that other runs on the same Redis never reach these sockets (channels resets its layers when
    # CHANNEL_LAYERS changes).
    prefix = f"buddy-mp-{uuid.uuid4().hex[:12]}"
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = prefix
    settings.CHANNEL_LAYERS = layers
    database_url = urlsplit(os.environ["DATABASE_URL"])._replace(path="/" + connection.settings_dict["NAME"]).geturl()
    # tests.settings in the server too: it keeps the inherited environment (channel prefix included).
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url,
        "BUDDY_CHANNEL_PREFIX": prefix,
    }
    servers = []
    try:
        for _ in range(2):
            port = free_port()
            log = tmp_path / f"daphne-{port}.log"
            with log.open("wb") as output:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "buddy.server",
                        "-b",
                        "127.0.0.1",
                        "-p",
                        str(port),
                        "buddy.asgi:application",
                    ],
                    cwd=settings.BASE_DIR,
                    env=env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            servers.append((process, port, log))
        deadline = time.monotonic() + 60
        for process, port, log in servers:
            _wait_listening(port, process, log, deadline)
        yield [port for _, port, _ in servers]
    finally:
        for process, _, _ in servers:
            process.terminate()
        for process, _, _ in servers:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@database_sync_to_async
def login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def receive(ws, timeout: float = 20) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def receive_canvas_command(ws) -> dict:
    """The next canvas frame (skipping anything else a turn may send to the answering socket)."""
    while True:
        frame = await receive(ws)
        if frame.get("type") == "canvas_command":
            return frame


async def test_a_change_made_anywhere_reaches_a_socket_on_another_process(daphne_ports, session):
    from websockets.asyncio.client import connect

    port_a, port_b = daphne_ports
    cookie = await login_cookie(session.user)
    await database_sync_to_async(canvas_command_run)(
        session=session, command="canvas_show_confirmation", params=ADD_EXAMPLES["canvas_show_confirmation"]
    )

    def open_socket(port: int):
        return connect(
            f"ws://127.0.0.1:{port}/ws/?agent=buddy&chat_id=main",
            origin=f"http://127.0.0.1:{port}",
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
            open_timeout=20,
        )

    async with open_socket(port_b) as on_b:
        replay = [await receive(on_b), await receive(on_b)]
        assert [frame["command"] for frame in replay] == ["canvas_set_mode", "canvas_show_confirmation"]
        assert replay[1]["version"] == 1

        # 1. Committed in this process (as a turn would): through Redis to process B.
        await database_sync_to_async(canvas_command_run)(
            session=session, command="canvas_add_card", params={"id": "note", "title": "From the test process"}
        )
        frame = await receive(on_b)
        assert (frame["command"], frame["params"]["id"], frame["version"]) == ("canvas_add_card", "note", 2)

        # 2. Made by process A, answering a socket of its own: through Redis to process B.
        async with open_socket(port_a) as on_a:
            assert (await receive(on_a))["version"] == 2
            await on_a.send(json.dumps({"type": "confirmation_response", "id": "go", "confirmed": True}))
            frame = await receive_canvas_command(on_b)
            assert frame["command"] == "canvas_update_card" and frame["version"] == 3
            assert frame["params"]["id"] == "go" and frame["params"]["answered"] == "confirmed"
