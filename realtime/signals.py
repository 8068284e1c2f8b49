"""Signal receivers of the realtime app, connected in RealtimeConfig.ready().

A socket is authenticated once, at its handshake; these close it when that login stops being valid
(README: WebSocket). Signals, not a service, because a password or `is_active` changes through
paths Buddy does not own: the admin, `changepassword`, Django's auth views, the shell.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import pre_save
from django.dispatch import receiver

from realtime.push import user_sockets_close


@receiver(user_logged_out, dispatch_uid="realtime.close_sockets_on_logout")
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None and user.pk is not None:
        user_sockets_close(user_id=user.pk)


@receiver(pre_save, sender=get_user_model(), dispatch_uid="realtime.close_sockets_on_credentials_change")
def close_sockets_on_credentials_change(
    sender: Any, instance: Any, update_fields: frozenset[str] | None = None, **kwargs: Any
) -> None:
    """A password change or a deactivation closes every socket of the user once it commits."""
    if instance.pk is None or (update_fields is not None and not {"password", "is_active"} & update_fields):
        return  # a new user, or e.g. the last_login update of every login: no query
    before = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()
    if before is None:
        return
    if before["password"] != instance.password or (before["is_active"] and not instance.is_active):
        user_id = instance.pk
        transaction.on_commit(lambda: user_sockets_close(user_id=user_id))
