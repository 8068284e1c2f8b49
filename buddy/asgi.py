"""ASGI entry point: HTTP through Django (static files included), WebSocket through Channels."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
django.setup(set_prefix=False)
from buddy.handlers import OneThreadASGIHandler  # noqa: E402  (needs Django set up first)
from conversations.checks import settings_refused  # noqa: E402

# daphne runs no system checks: a setting no server may start with stops this one here, saying why.
settings_refused()

django_asgi_app = OneThreadASGIHandler()  # what django.core.asgi.get_asgi_application() makes, on request threads

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402  (needs Django set up first)

from buddy.origins import SameOriginValidator  # noqa: E402
from buddy.views import healthz_asgi  # noqa: E402
from memory import semantic  # noqa: E402
from realtime.push import group_sends_handed_off, sockets_served_here  # noqa: E402
from web.routing import websocket_urlpatterns  # noqa: E402

protocols = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # The Origin must match scheme, host and port, not the host name only (buddy/origins.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


async def application(scope, receive, send):
    """`/healthz` straight from the event loop (buddy.views.healthz_asgi); everything else as routed."""
    if scope["type"] == "http":
        if scope["path"] == "/healthz":
            await healthz_asgi(scope, receive, send)
            return
        # A view waits for its turn on its request's thread (agent.threads.on_turn_thread_wait): the
        # turn's frames still go through this loop without the turn thread waiting for them.
        group_sends_handed_off()
    await protocols(scope, receive, send)


def _request_thread_done(**kwargs) -> None:
    """Django runs a request's `request_started` receivers and its response's `close()` (a streamed
    response's iteration too) on a thread made for that request, gone after it: its connections are
    closed (given back to the pool) with it, never kept (BUDDY_DB_CONN_MAX_AGE is for the long-lived
    threads; the request threads of buddy/handlers.py see to their own)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


request_finished.connect(_request_thread_done, dispatch_uid="buddy.request_thread_done")
sockets_served_here()  # this process's frames reach its own sockets (realtime/push.py)

# The model semantic search encodes questions with is built on a background thread at start-up, so
# the first search does not wait for it.
semantic.warm_up()
