"""Django's ASGI handler, with each request's middleware chain and view run in one go on the request's
thread (docs/architecture.md, "Threads").

Every middleware in settings.MIDDLEWARE is sync (WhiteNoise and the CSP middleware have no async
side), so Django's stock ASGI handler runs them on the request's thread anyway, but keeps its
innermost layer (URL resolution, `process_view`, the view) async: a request goes from the loop to that
thread, back to the loop, to the thread again for CSRF's `process_view`, back, to it again for a sync
view (an async view's sync ninja authentication too), and back for the response middleware. Built
sync as Django's WSGI handler is, the whole chain is one call on that thread; an async view still
runs (Django adapts it, through the loop).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase


class OneThreadASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        # thread_sensitive: the request's own thread (asgiref's ThreadSensitiveContext, per request).
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
