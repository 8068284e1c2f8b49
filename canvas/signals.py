"""Signal receivers of the canvas app, connected in CanvasConfig.ready()."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from canvas.push import user_sockets_close


@receiver(user_logged_out, dispatch_uid="canvas.close_sockets_on_logout")
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # A socket authenticated by the session cookie would otherwise outlive the login (contract §6).
    if user is not None and user.pk is not None:
        user_sockets_close(user_id=user.pk)
