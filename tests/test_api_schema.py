"""Schemathesis against /api/openapi.json (README, Testing): requests generated from the schema, valid
and invalid, must never get a 5xx, every answer must match what the schema says — status code,
content type, body and headers — and the schema must say what the server checks: a request it allows is
not refused with a 422 (positive data), one it forbids is refused (negative data), an undocumented method
is a 405 whose `Allow` lists exactly the documented ones. Bounded and deterministic: a fixed number of
examples per operation, derandomized (a fixed seed), so each run sends the same requests
(SCHEMATHESIS_EXAMPLES raises the number for a deeper run by hand). It runs in both of CI's suite runs,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from conversations.services import message_append, session_get_or_create
from conversations.tokens import api_token_create

EXAMPLES_PER_OPERATION = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "150"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
]


@pytest.fixture
def token(django_user_model, agent):
    user = django_user_model.objects.create_user(username="fuzz", password="fuzz-pass-1")
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    for i in range(3):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"message {i}")
    return api_token_create(user=user)


# Loaded when the module is collected (Django is set up by then; reading the schema needs no database).
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


# The turn of POST /prompt runs on a worker thread, with its own database connection.
@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_api_answers_as_its_schema_says_and_never_5xx(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
