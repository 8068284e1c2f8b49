"""The admin's lists answer a filter the database cannot run as they answer one Django refuses.

Django's admin checks a list's filters when it builds the query, and answers one it refuses by
showing the list again without its filters (`?e=1`). A filter it accepts may still fail when the
database runs it: a NUL character in a text filter on PostgreSQL (`?role=%00`), a year past 9999
(`?created_at__year=99999`). Those would be server errors; here they get that same answer.
"""

from __future__ import annotations

import logging

from django.contrib.admin.views.main import ERROR_FLAG
from django.db import DataError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

logger = logging.getLogger(__name__)


class AdminListFilterErrors:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        match = request.resolver_match
        if request.method not in {"GET", "HEAD"}:
            return None  # an action posted from the list: its failure is a failure
        if match is None or match.app_name != "admin" or not (match.url_name or "").endswith("_changelist"):
            return None
        if not isinstance(exception, DataError | ValueError | OverflowError):
            return None
        if set(request.GET) <= {ERROR_FLAG}:
            return None  # the list without filters failed: not a filter's doing
        logger.warning("admin list %s failed with its filters; shown without them", request.path, exc_info=exception)
        return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
