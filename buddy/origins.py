"""The WebSocket handshake's Origin check: the same rule as Django's CSRF origin check.

A browser sends the session cookie with a WebSocket handshake from any page, so the Origin is what
tells a page of this site from another one. channels' AllowedHostsOriginValidator compares host
names only: a page on another port or scheme of the same host (another service, a plain-HTTP page
next to an HTTPS site) would pass. Here the Origin must be the server's own origin — scheme, host and
port — or one of CSRF_TRUSTED_ORIGINS (wildcard subdomains as in Django), and the Host must be one of
ALLOWED_HOSTS. A handshake without an Origin is refused: browsers always send one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _is_secure(scope: dict[str, Any]) -> bool:
    """As Django's request.is_secure(): the scheme, or the proxy's header named by SECURE_PROXY_SSL_HEADER."""
    if scope.get("scheme") == "wss":
        return True
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        meta_name, secure_value = proxy_header
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        value = _header(scope, header)
        return value.split(",", 1)[0].strip() == secure_value
    return False


def _normalised(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the scheme's default port filled in; None when it does not parse."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path:
        return None
    return scheme.lower(), parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme.lower(), 0)


def origin_allowed(scope: dict[str, Any]) -> bool:
    origin = _header(scope, b"origin").strip()
    host = _header(scope, b"host").strip()
    if not origin or not host or origin == "null":
        return False
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    try:
        origin_parts = urlsplit(origin)
    except ValueError:
        return False
    requested = _normalised(origin_parts.scheme, origin_parts.netloc)
    if requested is None:
        return False
    own = _normalised("https" if _is_secure(scope) else "http", host)
    if requested == own:
        return True
    for trusted in getattr(settings, "CSRF_TRUSTED_ORIGINS", ()):
        trusted_parts = urlsplit(trusted)
        if trusted_parts.scheme.lower() != requested[0]:
            continue
        if "*" in trusted_parts.netloc:
            if is_same_domain(origin_parts.netloc.lower(), trusted_parts.netloc.lower().lstrip("*")):
                return True
        elif _normalised(trusted_parts.scheme, trusted_parts.netloc) == requested:
            return True
    return False


class SameOriginValidator:
    """ASGI middleware: a WebSocket handshake whose Origin is not allowed is refused (HTTP 403)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier.as_asgi()(scope, receive, send)
        return await self.application(scope, receive, send)
