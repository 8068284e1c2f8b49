"""Django's ASGI handler, with each request's middleware chain and view run in one go on one of the
long-lived request threads (docs/architecture.md, "Threads").

Every middleware in settings.MIDDLEWARE is sync (WhiteNoise and the CSP middleware have no async
side), so Django's stock ASGI handler runs them on the request's thread anyway, but keeps its
innermost layer (URL resolution, `process_view`, the view) async: a request goes from the loop to that
thread, back to the loop, to the thread again for CSRF's `process_view`, back, to it again for a sync
view (an async view's sync ninja authentication too), and back for the response middleware. Built
sync as Django's WSGI handler is, the whole chain is one call on that thread; an async view still
runs (Django adapts it, through the loop).

The stock handler runs that chain on a thread asgiref makes for the request, gone after it, which
opens a database connection of its own every time. Here it runs on a pool of threads that outlive
their requests, as a WSGI server's do: on SQLite each keeps its connection (BUDDY_DB_CONN_MAX_AGE); on
PostgreSQL each gives its connection back to psycopg's pool when its request ends.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import close_old_connections, connections, reset_queries
from django.http import HttpRequest, HttpResponseBase

# Idle threads serve the next requests; a new one starts only while every one is busy. A `POST /prompt`
# holds its thread while its turn runs (agent.threads.on_turn_thread_wait), so there are many more than
# BUDDY_TURN_THREADS: requests queue here only past this many at once.
REQUEST_THREADS = 256


@functools.cache
def request_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=REQUEST_THREADS, thread_name_prefix="buddy-request")


def _get_response_on_request_thread(handler: ASGIHandler, request: HttpRequest) -> HttpResponseBase:
    # Django's request_started and request_finished receivers run on asgiref's thread of the request,
    # not this one: what they do for this thread's connections (close an expired or broken one, start
    # DEBUG's query log afresh) is done here.
    reset_queries()
    close_old_connections()
    try:
        return handler.get_response(request)
    finally:
        _request_connections_done()


def _request_connections_done() -> None:
    """A SQLite connection stays with the thread (BUDDY_DB_CONN_MAX_AGE). A PostgreSQL one goes back to
    psycopg's pool, or is closed with BUDDY_DB_POOL=0: PostgreSQL's connections are counted
    (docs/deploy.md), and there are many more request threads than turn threads."""
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "sqlite":
            connection.close_if_unusable_or_obsolete()
        elif not connection.in_atomic_block:
            connection.close()


class OneThreadASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        run = sync_to_async(_get_response_on_request_thread, thread_sensitive=False, executor=request_executor())
        return await run(self, request)
