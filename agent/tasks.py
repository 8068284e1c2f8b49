"""Background tasks run by django-q2 workers (`manage.py qcluster`, started by `make run`)."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from agent.llm import ModelError, model_client
from agent.models import IdempotencyKey, ScheduledRun
from agent.schedules import schedule_claim_due
from agent.submit import prompt_session
from agent.turn import TurnRunning, summary_bursts, turn_run
from conversations.errors import DomainError
from conversations.leases import LeaseHeartbeat, lease_release, lease_renew, lease_take
from conversations.models import ModelCall, Session
from conversations.refs import ChatRef
from conversations.services import model_call_record
from memory import summaries

logger = logging.getLogger(__name__)

BUSY_RETRIES = 30  # a scheduled prompt's chat is mid-turn: wait for it, up to this many seconds
# A pending run that no worker has taken this long after it was queued is queued again.
REQUEUE_AFTER = timedelta(seconds=30)

IDEMPOTENCY_KEY_TTL = timedelta(days=1)

SUMMARY_ATTEMPTS = 5  # a summary whose model call failed this often waits for the chat's next turn


def idempotency_keys_prune() -> int:
    """Forget Idempotency-Key answers older than a day (a retry that late is a new request)."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - IDEMPOTENCY_KEY_TTL).delete()
    return deleted


def schedules_ensure() -> None:
    """The recurring housekeeping schedules, created once (idempotent)."""
    Schedule.objects.update_or_create(
        name="buddy: prune idempotency keys",
        defaults={"func": "agent.tasks.idempotency_keys_prune", "schedule_type": Schedule.HOURLY},
    )
    Schedule.objects.update_or_create(
        name="buddy: run due scheduled prompts",
        defaults={
            "func": "agent.tasks.schedules_run_due",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
        },
    )


def _run_lease_ttl() -> timedelta:
    return timedelta(seconds=settings.BUDDY_TURN_LEASE_SECONDS)


def scheduled_run_execute(*, run_id: int) -> str:
    """Run one claimed due time as its user, holding the run's lease (renewed by a heartbeat) while it
    runs. Idempotent: a run that is done, or whose lease another worker holds, is left alone, and a
    run whose worker died mid-turn finishes that turn, never archiving its prompt twice."""
    lease_id = uuid.uuid4().hex
    pending = ScheduledRun.objects.filter(pk=run_id, status=ScheduledRun.Status.PENDING)
    if not lease_take(pending, field="lease_expires_at", ttl=_run_lease_ttl(), lease_id=lease_id):
        status = ScheduledRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        return "running elsewhere" if status == ScheduledRun.Status.PENDING else str(status)
    held = ScheduledRun.objects.filter(pk=run_id, lease_id=lease_id)
    heartbeat = LeaseHeartbeat(
        lambda: lease_renew(held, field="lease_expires_at", ttl=_run_lease_ttl()),
        every=max(0.5, settings.BUDDY_TURN_LEASE_SECONDS / 4),
        name=f"scheduled-run-{run_id}",
    ).start()
    try:
        return _scheduled_run(ScheduledRun.objects.select_related("schedule__user", "schedule__agent").get(pk=run_id))
    finally:
        heartbeat.stop()
        lease_release(held, field="lease_expires_at", lease_id="")


def _scheduled_run(run: ScheduledRun) -> str:
    schedule = run.schedule
    if not schedule.user.is_active:  # deactivated since the claim
        ScheduledRun.objects.filter(pk=run.pk).update(status=ScheduledRun.Status.FAILED, detail="user inactive")
        return "failed"
    try:
        session = prompt_session(user=schedule.user, chat=ChatRef(agent=schedule.agent.slug, chat_id=schedule.chat_id))

        def remember(prompt) -> None:
            ScheduledRun.objects.filter(pk=run.pk).update(prompt=prompt)

        for _ in range(BUSY_RETRIES):
            try:
                if run.prompt_id:  # a worker died mid-turn: finish that turn, never a second prompt
                    turn_run(session=session, prompt=run.prompt)
                else:
                    turn_run(session=session, text=schedule.text, on_prompt=remember, kind="scheduled")
                break
            except TurnRunning:
                time.sleep(1)
                run.refresh_from_db()
        else:
            raise TurnRunning()
    except DomainError as exc:
        logger.warning("scheduled prompt %s failed: %s", schedule.pk, exc)
        ScheduledRun.objects.filter(pk=run.pk).update(status=ScheduledRun.Status.FAILED, detail=str(exc))
        return "failed"
    ScheduledRun.objects.filter(pk=run.pk).update(status=ScheduledRun.Status.DONE)
    return "done"


def schedules_run_due() -> int:
    """The periodic task: claim what is due and run each claimed time on the task engine, and queue
    again the runs whose worker died (scheduled_runs_orphaned)."""
    runs = schedule_claim_due()
    for run in runs:
        async_task("agent.tasks.scheduled_run_execute", run_id=run.pk, group="scheduled-prompts")
    for run_id in scheduled_runs_orphaned():
        async_task("agent.tasks.scheduled_run_execute", run_id=run_id, group="scheduled-prompts")
    return len(runs)


def scheduled_runs_orphaned() -> list[int]:
    """Pending runs no worker holds: their lease expired (the worker died), or none took them within
    REQUEUE_AFTER of being queued (the task was lost). Each is marked as queued again with a
    conditional UPDATE, so of every process looking only one queues it."""
    now = timezone.now()
    stale = ScheduledRun.objects.filter(status=ScheduledRun.Status.PENDING).filter(
        Q(lease_expires_at__lt=now)
        | Q(lease_expires_at__isnull=True) & (Q(queued_at__isnull=True) | Q(queued_at__lt=now - REQUEUE_AFTER))
    )
    orphaned = []
    for run_id, expires_at, queued_at in stale.values_list("pk", "lease_expires_at", "queued_at")[:100]:
        claimed = ScheduledRun.objects.filter(pk=run_id, lease_expires_at=expires_at, queued_at=queued_at).update(
            lease_expires_at=None, lease_id="", queued_at=now
        )
        if claimed:
            logger.warning("scheduled run %s: its worker is gone; queued again", run_id)
            orphaned.append(run_id)
    return orphaned


def summary_update(session_id: int, attempt: int = 1) -> str:
    """The summary job, queued after a turn when memory says a summary is due (agent.turn): memory
    folds what the window dropped into the chat's summary (memory.summaries.summary_update), written
    by BUDDY_SUMMARY_MODEL. A failed model call is retried with backoff, up to SUMMARY_ATTEMPTS."""
    summary_bursts.forget(session_id)  # run inline, in the process that queued it
    try:
        return summaries.summary_update(session_id=session_id, summarise=_summarise)
    except ModelError as exc:
        if attempt >= SUMMARY_ATTEMPTS:
            logger.error("summary of session %s failed %s times: %s", session_id, attempt, exc)
            return "failed"
        _summary_retry_later(session_id, attempt)
        return "retrying"


def _summarise(*, session: Session, system: str, prompt: str, max_tokens: int) -> str:
    """One call to the summary model, recorded in ModelCall (a failed one too, then re-raised)."""
    model = settings.BUDDY_SUMMARY_MODEL
    started = time.monotonic()
    try:
        reply = model_client().complete(model=model, system=system, prompt=prompt, max_tokens=max_tokens)
    except ModelError as exc:
        model_call_record(
            session=session, kind=ModelCall.Kind.SUMMARY, model=model, reply=None, started=started, error=str(exc)
        )
        raise
    model_call_record(session=session, kind=ModelCall.Kind.SUMMARY, model=model, reply=reply, started=started)
    return "\n".join(block.get("text", "") for block in reply.content if block.get("type") == "text")


def _summary_retry_later(session_id: int, attempt: int) -> None:
    """django-q2 acknowledges failed tasks; retries with backoff are a one-off schedule of our own."""
    Schedule.objects.create(
        name=f"summary retry {session_id} #{attempt + 1} {timezone.now():%H%M%S%f}",
        func="agent.tasks.summary_update",
        args=f"{session_id},{attempt + 1}",
        schedule_type=Schedule.ONCE,
        repeats=1,
        next_run=timezone.now() + timedelta(seconds=30 * 2 ** (attempt - 1)),
    )
