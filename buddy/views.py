from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as django_bad_request

logger = logging.getLogger(__name__)


# /healthz's own database thread: never queued behind turns or other requests' database work.
_health_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="buddy-healthz")
HEALTH_TIMEOUT_SECONDS = 5.0


def _database_answers() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        connection.close()  # the next check connects afresh
        raise


async def _channel_layer_answers() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "healthz"})
    await layer.receive(channel)


async def health() -> tuple[int, dict[str, Any]]:
    """The status and body of /healthz: 200 when the database and the channel layer answer, else 503.
    Run on the event loop, its one query on a thread of its own: busy turns never hold it up."""
    problems = []
    database = sync_to_async(_database_answers, thread_sensitive=False, executor=_health_executor)
    for name, check in (("database", database), ("channel layer", _channel_layer_answers)):
        try:
            await asyncio.wait_for(check(), timeout=HEALTH_TIMEOUT_SECONDS)
        except Exception as exc:  # any failure means "not healthy", reported, not raised
            logger.warning("healthz: %s: %r", name, exc)
            problems.append(name)
    if problems:
        return 503, {"status": "unavailable", "failing": problems}
    return 200, {"status": "ok"}


async def healthz(request: HttpRequest) -> JsonResponse:
    """/healthz through Django (the test client; a server answers it in buddy/asgi.py, before Django)."""
    status, body = await health()
    return JsonResponse(body, status=status)


async def healthz_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/healthz as a bare ASGI app: no middleware, no thread hop, whatever the Host (a load balancer
    probes by address). Used by buddy/asgi.py."""
    status, body = await health()
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload if scope.get("method") != "HEAD" else b""})


def request_too_large_detail() -> str:
    return f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes."


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400: a body Django refused for its size is a 413 in JSON, wherever it was sent."""
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"code": "too_large", "detail": request_too_large_detail()}, status=413)
    return django_bad_request(request, exception)
