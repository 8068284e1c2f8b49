from __future__ import annotations

from django.urls import path

from web.consumers import CanvasConsumer

websocket_urlpatterns = [path("ws/", CanvasConsumer.as_asgi(), name="socket")]
