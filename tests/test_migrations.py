"""Upgrading a database with data in it: the agent's tables (moved from conversations, renamed agent_*)
and the summary leases (moved from a session column to memory) arrive with every row and foreign key,
and going back and forward again loses nothing either."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from django_q.models import Schedule

from agent.models import IdempotencyKey, RateCounter, ScheduledPrompt, ScheduledRun
from conversations.models import Session
from memory.apps import _search_triggers_ensure
from memory.models import SummaryLease

# The newest migrations of the release before the move.
BEFORE = [
    ("conversations", "0010_idempotencykey_no_status"),
    ("memory", "0012_vectors_in_eight_bits"),
    ("canvas", "0003_relayed_frames"),
]
MOVED = {
    "scheduledprompt": ScheduledPrompt,
    "scheduledrun": ScheduledRun,
    "ratecounter": RateCounter,
    "idempotencykey": IdempotencyKey,
}
# Columns added to a moved table since, and what they hold on the rows from before (agent 0003: a
# scheduled run's lease, free).
ADDED = {"scheduledrun": {"lease_id": "", "lease_expires_at": None, "queued_at": None}}
# Each moved table's foreign keys: column → the table it points at.
FOREIGN_KEYS = {
    "scheduledprompt": {"user_id": "auth_user", "agent_id": "conversations_agent"},
    "scheduledrun": {"schedule_id": "agent_scheduledprompt", "prompt_id": "conversations_message"},
    "ratecounter": {},
    "idempotencykey": {
        "user_id": "auth_user",
        "session_id": "conversations_session",
        "prompt_id": "conversations_message",
    },
}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    # As `migrate` does after every run: SQLite drops the search index's triggers on rebuilt tables.
    _search_triggers_ensure()
    return executor


def _old_data(old_apps, *, user, agent) -> dict:
    """Rows in every moved table and column, written through the models of the release before."""
    OldSession = old_apps.get_model("conversations", "Session")
    OldMessage = old_apps.get_model("conversations", "Message")
    now = timezone.now().replace(microsecond=123000)
    held = OldSession.objects.create(
        user_id=user.pk, agent_id=agent.pk, chat_id="held", summary_lease_expires_at=now + timedelta(minutes=4)
    )
    expired = OldSession.objects.create(
        user_id=user.pk, agent_id=agent.pk, chat_id="expired", summary_lease_expires_at=now - timedelta(hours=2)
    )
    free = OldSession.objects.create(user_id=user.pk, agent_id=agent.pk, chat_id="free")
    prompts = [
        OldMessage.objects.create(
            session_id=held.pk,
            role="user",
            content=[{"type": "text", "text": f"prompt {n}"}],
            tokens=9,
            is_turn_start=True,
        )
        for n in range(2)
    ]
    OldScheduledPrompt = old_apps.get_model("conversations", "ScheduledPrompt")
    recurring = OldScheduledPrompt.objects.create(
        user_id=user.pk,
        agent_id=agent.pk,
        chat_id="held",
        text="Morning briefing",
        next_run_at=now + timedelta(hours=1),
        every_seconds=86400,
        last_run_at=now - timedelta(days=1),
    )
    once = OldScheduledPrompt.objects.create(user_id=user.pk, agent_id=agent.pk, text="Once", enabled=False)
    OldScheduledRun = old_apps.get_model("conversations", "ScheduledRun")
    OldScheduledRun.objects.create(
        schedule_id=recurring.pk, due_at=now - timedelta(days=2), status="done", prompt_id=prompts[0].pk
    )
    OldScheduledRun.objects.create(
        schedule_id=recurring.pk, due_at=now - timedelta(days=1), status="failed", detail="down"
    )
    OldScheduledRun.objects.create(schedule_id=once.pk, due_at=now, prompt_id=prompts[1].pk)
    OldRateCounter = old_apps.get_model("conversations", "RateCounter")
    OldRateCounter.objects.create(key=f"prompt:{user.pk}", window_start=now.replace(second=0, microsecond=0), count=7)
    OldRateCounter.objects.create(key="login-name:alice", window_start=now.replace(minute=0, second=0), count=3)
    OldIdempotencyKey = old_apps.get_model("conversations", "IdempotencyKey")
    OldIdempotencyKey.objects.create(
        user_id=user.pk,
        key="retry-1",
        session_id=held.pk,
        prompt_id=prompts[0].pk,
        response={"reply": "Hello", "message_id": 41, "sources": []},
    )
    OldIdempotencyKey.objects.create(user_id=user.pk, key="retry-2", response={"detail": "The model failed."})
    OldIdempotencyKey.objects.create(user_id=user.pk, key="in-flight", session_id=free.pk)
    # A summary retry django-q2 held for the task at its earlier address.
    Schedule.objects.create(
        name="summary retry", func="memory.summaries.summary_update", args=f"{held.pk},2", schedule_type=Schedule.ONCE
    )
    return {
        "rows": {name: _rows(old_apps.get_model("conversations", name)) for name in MOVED},
        "leases": {held.pk: held.summary_lease_expires_at, expired.pk: expired.summary_lease_expires_at},
        "sessions": sorted(OldSession.objects.values_list("pk", flat=True)),
        "held": held.pk,
    }


def _rows(model) -> list[dict]:
    """Every column of every row, foreign keys as ids."""
    return list(model.objects.order_by("pk").values())


def _foreign_keys(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {
        constraint["columns"][0]: constraint["foreign_key"][0]
        for constraint in constraints.values()
        if constraint["foreign_key"]
    }


def _assert_arrived(data: dict, *, user) -> None:
    """The latest models read every row as it was written, over tables named and linked as the agent's."""
    tables = set(connection.introspection.table_names())
    for name, model in MOVED.items():
        assert model._meta.db_table == f"agent_{name}" and f"agent_{name}" in tables
        assert f"conversations_{name}" not in tables
        assert _rows(model) == [{**row, **ADDED.get(name, {})} for row in data["rows"][name]], name
        assert _foreign_keys(f"agent_{name}") == FOREIGN_KEYS[name], name
    run = ScheduledRun.objects.select_related("schedule", "prompt").get(status="done")
    assert run.schedule.text == "Morning briefing" and run.prompt.content == [{"type": "text", "text": "prompt 0"}]
    assert ScheduledPrompt.objects.get(text="Morning briefing").runs.count() == 2
    key = IdempotencyKey.objects.select_related("session", "prompt").get(key="retry-1")
    assert key.session.chat_id == "held" and key.prompt.session_id == data["held"]
    # The leases, in memory's table; the session's column is gone.
    assert dict(SummaryLease.objects.values_list("session_id", "expires_at")) == data["leases"]
    with connection.cursor() as cursor:
        columns = {c.name for c in connection.introspection.get_table_description(cursor, "conversations_session")}
    assert "summary_lease_expires_at" not in columns
    assert sorted(Session.objects.values_list("pk", flat=True)) == data["sessions"]
    assert Schedule.objects.get(name="summary retry").func == "agent.tasks.summary_update"
    # Permissions given on a moved model are the agent model's.
    ContentType.objects.clear_cache()
    assert type(user).objects.get(pk=user.pk).has_perm("agent.change_scheduledprompt")


def _assert_back(old_apps, data: dict) -> None:
    """The models of the release before read every row as it was written."""
    tables = set(connection.introspection.table_names())
    for name in MOVED:
        assert f"agent_{name}" not in tables
        assert _rows(old_apps.get_model("conversations", name)) == data["rows"][name], name
    session_model = old_apps.get_model("conversations", "Session")
    leases = session_model.objects.filter(summary_lease_expires_at__isnull=False)
    assert dict(leases.values_list("pk", "summary_lease_expires_at")) == data["leases"]
    assert Schedule.objects.get(name="summary retry").func == "memory.summaries.summary_update"
    ContentType.objects.clear_cache()
    assert ContentType.objects.filter(app_label="conversations", model="scheduledprompt").exists()


@pytest.mark.django_db(transaction=True)
def test_the_moved_tables_and_leases_arrive_intact_and_survive_a_round_trip(user, agent):
    permission = Permission.objects.get(content_type__app_label="agent", codename="change_scheduledprompt")
    user.user_permissions.add(permission)
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        executor = _migrate([*BEFORE, ("agent", None)])
        old_apps = executor.loader.project_state(BEFORE).apps
        data = _old_data(old_apps, user=user, agent=agent)
        assert Permission.objects.get(pk=permission.pk).content_type.app_label == "conversations"

        _migrate(after)
        _assert_arrived(data, user=user)

        _migrate([*BEFORE, ("agent", None)])
        _assert_back(old_apps, data)

        _migrate(after)
        _assert_arrived(data, user=user)
    finally:
        _migrate(after)

    # The moved tables go on as before: new rows take new ids, and a foreign key is still enforced.
    newest = ScheduledPrompt.objects.create(user=user, agent=agent, text="After the move")
    assert newest.pk > max(row["id"] for row in data["rows"]["scheduledprompt"])
    with pytest.raises(IntegrityError), transaction.atomic():
        ScheduledRun.objects.create(schedule_id=newest.pk + 1000, due_at=timezone.now())
