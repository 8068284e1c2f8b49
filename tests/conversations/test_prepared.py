"""PreparedQuery: a queryset's SQL built once, run with each call's values; the same rows as the queryset."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.db import connection
from django.db.models import TextField
from django.db.models.functions import Cast
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Agent, Message, Session
from conversations.prepared import NotPreparable, PreparedQuery
from conversations.services import message_append

pytestmark = pytest.mark.django_db


def _session_by_chat(user_id, slug, chat_id):
    return Session.objects.filter(user_id=user_id, agent__slug=slug, chat_id=chat_id).select_related("agent")


SESSION_BY_CHAT = PreparedQuery(_session_by_chat, user_id=int, slug=str, chat_id=str)


@pytest.fixture
def chats(user, other_user, agent):
    helper = Agent.objects.create(slug="helper", name="Helper")
    made = [
        Session.objects.create(user=user, agent=agent, chat_id="main"),
        Session.objects.create(user=user, agent=helper, chat_id="main"),
        Session.objects.create(user=other_user, agent=agent, chat_id="main"),
        Session.objects.create(user=user, agent=agent, chat_id="trips:2026"),
    ]
    for session in made:
        message_append(session=session, role="user", content=f"hello from {session.chat_id}")
    return made


def test_model_rows_with_their_related_rows_are_those_of_the_queryset(user, other_user, chats):
    for user_id, slug, chat_id in [
        (user.pk, "buddy", "main"),
        (user.pk, "helper", "main"),
        (other_user.pk, "buddy", "main"),
        (user.pk, "buddy", "trips:2026"),
        (user.pk, "buddy", "nowhere"),
    ]:
        expected = list(_session_by_chat(user_id, slug, chat_id))
        got = SESSION_BY_CHAT.rows(user_id=user_id, slug=slug, chat_id=chat_id)
        assert got == expected
        for prepared, orm in zip(got, expected, strict=True):
            assert prepared.__dict__.keys() == orm.__dict__.keys()
            assert {f.attname: getattr(prepared, f.attname) for f in Session._meta.concrete_fields} == {
                f.attname: getattr(orm, f.attname) for f in Session._meta.concrete_fields
            }
            with CaptureQueriesContext(connection) as queries:
                assert prepared.agent.slug == slug  # came with the row
            assert not queries.captured_queries


def test_values_annotations_order_and_slice_are_those_of_the_queryset(chats):
    def newest(session_id, since):
        return (
            Message.objects.filter(session_id=session_id, id__gte=since)
            .order_by("-id")
            .annotate(raw=Cast("content", output_field=TextField()))
            .values_list("id", "role", "raw", "created_at")[:2]
        )

    prepared = PreparedQuery(newest, session_id=int, since=int)
    for session in chats:
        message_append(session=session, role="assistant", content="and a reply")
        for since in (0, session.messages.order_by("id").last().pk):
            assert prepared.rows(session_id=session.pk, since=since) == list(newest(session.pk, since))


def test_the_sql_is_built_once_and_runs_as_one_query_with_the_values_given(user, chats):
    prepared = PreparedQuery(_session_by_chat, user_id=int, slug=str, chat_id=str)
    built = []
    build = prepared.build
    prepared.build = lambda **values: (built.append(values), build(**values))[1]
    with CaptureQueriesContext(connection) as queries:
        for chat_id in ("main", "trips:2026", "100% '_sure_' \\ \"quoted\""):
            rows = prepared.rows(user_id=user.pk, slug="buddy", chat_id=chat_id)
            assert [s.chat_id for s in rows] == ([chat_id] if chat_id != "100% '_sure_' \\ \"quoted\"" else [])
    assert len(built) == 2  # from two sets of stand-ins, on the first call only
    assert len(queries.captured_queries) == 3
    assert len({q["sql"].split("WHERE")[0] for q in queries.captured_queries}) == 1


def test_a_value_of_another_type_is_refused():
    with pytest.raises(TypeError, match="user_id must be int"):
        SESSION_BY_CHAT.rows(user_id="1", slug="buddy", chat_id="main")
    with pytest.raises(TypeError, match="user_id must be int"):
        SESSION_BY_CHAT.rows(user_id=True, slug="buddy", chat_id="main")
    with pytest.raises(NotPreparable, match="only int and str"):
        PreparedQuery(lambda at: Message.objects.filter(created_at__gte=at), at=datetime)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda value: Session.objects.filter(chat_id__contains=value), id="a lookup that wraps its value"),
        pytest.param(lambda value: Session.objects.filter(chat_id="main")[: len(value)], id="a value not in the SQL"),
        pytest.param(lambda value: Session.objects.filter(chat_id=value.lower()), id="a value changed in Python"),
    ],
)
def test_a_queryset_whose_values_do_not_reach_the_sql_unchanged_is_refused(build):
    with pytest.raises(NotPreparable, match="does not reach the SQL"):
        PreparedQuery(build, value=str).rows(value="main")


def test_a_lookup_that_rewrites_its_value_on_one_database_is_refused_there_and_exact_elsewhere(chats):
    """`iexact` escapes the LIKE wildcards of its value on SQLite, and compares UPPER() of it unchanged on
    PostgreSQL: refused on the one, and on the other the same rows as the queryset whatever the value."""

    def build(value):
        return Session.objects.filter(chat_id__iexact=value).order_by("pk")

    prepared = PreparedQuery(build, value=str)
    values = ["main", "MAIN", "ma%", "m_in", "TRIPS:2026", "trips%", "a\\b", "'"]
    if connection.vendor == "sqlite":
        with pytest.raises(NotPreparable, match="does not reach the SQL"):
            prepared.rows(value="main")
        return
    for value in values:
        assert prepared.rows(value=value) == list(build(value)), value


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda limit: Session.objects.all()[:limit], id="inlined only"),
        pytest.param(lambda limit: Session.objects.filter(id__lt=limit)[:limit], id="a parameter and inlined"),
    ],
)
def test_an_int_value_inlined_in_the_sql_is_refused(build):
    with pytest.raises(NotPreparable, match="does not reach the SQL"):
        PreparedQuery(build, limit=int).rows(limit=3)


def _messages_before_now(session_id):
    return Message.objects.filter(session_id=session_id, created_at__lte=timezone.now()).order_by("id")


def test_a_queryset_that_takes_the_time_when_built_is_refused(chats):
    """Built once, its time would stay the time of the first call: messages written since never show."""
    prepared = PreparedQuery(_messages_before_now, session_id=int)
    with pytest.raises(NotPreparable, match="not the same"):
        prepared.rows(session_id=chats[0].pk)


@pytest.mark.parametrize(
    ("build", "kinds"),
    [
        pytest.param(
            lambda since, session_id: Message.objects.filter(session_id=session_id, id__gte=since, id__lt=since + 1),
            {"since": int, "session_id": int},
            id="a value computed from another",
        ),
        pytest.param(
            lambda chat_id: Session.objects.filter(chat_id=chat_id.strip()),
            {"chat_id": str},
            id="a value changed in Python for some values only",
        ),
        pytest.param(
            lambda chat_id: Session.objects.filter(chat_id=chat_id[:100]),
            {"chat_id": str},
            id="a value cut in Python",
        ),
    ],
)
def test_a_queryset_whose_sql_takes_other_values_than_those_given_is_refused(build, kinds):
    with pytest.raises(NotPreparable):
        PreparedQuery(build, **kinds).rows(**{name: kind() for name, kind in kinds.items()})


def test_a_queryset_empty_whatever_the_values_is_refused_not_run(chats):
    prepared = PreparedQuery(lambda session_id: Session.objects.filter(pk=session_id, chat_id__in=[]), session_id=int)
    with pytest.raises(NotPreparable, match="no SQL to run"):
        prepared.rows(session_id=chats[0].pk)
