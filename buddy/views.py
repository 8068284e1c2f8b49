from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

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


async def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer answer, else 503 (for the reverse proxy). Answered
    on the event loop, its one query on a thread of its own: busy turns never hold it up."""
    problems = []
    database = sync_to_async(_database_answers, thread_sensitive=False, executor=_health_executor)
    for name, check in (("database", database), ("channel layer", _channel_layer_answers)):
        try:
            await asyncio.wait_for(check(), timeout=HEALTH_TIMEOUT_SECONDS)
        except Exception as exc:  # any failure means "not healthy", reported, not raised
            logger.warning("healthz: %s: %r", name, exc)
            problems.append(name)
    if problems:
        return JsonResponse({"status": "unavailable", "failing": problems}, status=503)
    return JsonResponse({"status": "ok"})


def request_too_large_detail() -> str:
    return f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes."


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400: a body Django refused for its size is a 413 in JSON, wherever it was sent."""
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"code": "too_large", "detail": request_too_large_detail()}, status=413)
    return django_bad_request(request, exception)
