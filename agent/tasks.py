"""Background tasks run by django-q2 workers (`manage.py qcluster`, started by `make run`)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from conversations.models import IdempotencyKey

IDEMPOTENCY_KEY_TTL = timedelta(days=1)


def idempotency_keys_prune() -> int:
    """Forget Idempotency-Key answers older than a day (a retry that late is a new request)."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - IDEMPOTENCY_KEY_TTL).delete()
    return deleted


def schedules_ensure() -> None:
    """The recurring housekeeping schedules, created once (idempotent)."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name="buddy: prune idempotency keys",
        defaults={"func": "agent.tasks.idempotency_keys_prune", "schedule_type": Schedule.HOURLY},
    )
    Schedule.objects.update_or_create(
        name="buddy: run due scheduled prompts",
        defaults={
            "func": "agent.schedules.schedules_run_due",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
        },
    )
