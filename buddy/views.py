from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as django_bad_request

logger = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer answer, else 503 (for the reverse proxy)."""
    problems = []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means "not healthy", reported, not raised
        logger.warning("healthz: database: %s", exc)
        problems.append("database")
    try:
        layer = get_channel_layer()
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.send)(channel, {"type": "healthz"})
        async_to_sync(layer.receive)(channel)
    except Exception as exc:
        logger.warning("healthz: channel layer: %s", exc)
        problems.append("channel layer")
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
