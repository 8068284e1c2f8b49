"""A person's theme (system, light, dark): kept on the server per user (`/preferences`), rendered on
<html> before the page's first paint and handed to the page in its config; bad input is a clear 422."""

from __future__ import annotations

import json
import re
from typing import get_args

import pytest
from django.test import Client

from web.models import Preferences, Theme
from web.schemas import ThemeName
from web.services import InvalidTheme, preferences_set

pytestmark = pytest.mark.django_db


def put(client, body) -> object:
    return client.put(
        "/preferences", json.dumps(body) if not isinstance(body, str) else body, content_type="application/json"
    )


def html_tag(client) -> str:
    return re.search(r"<html[^>]*>", client.get("/").content.decode()).group(0)


def page_theme(client) -> str:
    page = client.get("/").content.decode()
    config = json.loads(re.search(r'<script id="buddy-config" type="application/json">(.*?)</script>', page, re.S)[1])
    return config["preferences"]["theme"]


def test_a_person_has_the_system_theme_until_they_choose(api):
    assert api.get("/preferences").json() == {"theme": "system"}
    assert "data-color-scheme" not in html_tag(api)
    assert page_theme(api) == "system"
    assert not Preferences.objects.exists()  # reading creates nothing


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_chosen_theme_is_kept_and_served_on_the_html_element(api, theme):
    response = put(api, {"theme": theme})
    assert response.status_code == 200 and response.json() == {"theme": theme}
    assert api.get("/preferences").json() == {"theme": theme}
    assert f'data-color-scheme="{theme}"' in html_tag(api)  # the first paint is already in that theme
    assert page_theme(api) == theme
    assert put(api, {"theme": "system"}).json() == {"theme": "system"}
    assert "data-color-scheme" not in html_tag(api)


def test_the_choice_is_one_persons_own(api, user, other_user):
    put(api, {"theme": "dark"})
    other = Client()
    other.force_login(other_user)
    assert other.get("/preferences").json() == {"theme": "system"}
    assert "data-color-scheme" not in html_tag(other)
    again = Client()  # another browser of the same person
    again.force_login(user)
    assert 'data-color-scheme="dark"' in html_tag(again)


@pytest.mark.parametrize(
    "body",
    [{"theme": "sepia"}, {"theme": ""}, {"theme": None}, {"theme": 1}, {}, {"theme": "dark\u0000"}, ["dark"]],
)
def test_a_theme_the_page_does_not_know_is_a_422_naming_the_field(api, body):
    response = put(api, body)
    assert response.status_code == 422
    error = response.json()
    assert error["code"] == "invalid_field"
    if isinstance(body, dict):
        assert error["errors"][0]["field"] == "theme"
    assert api.get("/preferences").json() == {"theme": "system"}


def test_a_body_that_is_not_json_is_a_422(api):
    response = put(api, "{theme: dark")
    assert (response.status_code, response.json()["code"]) == (422, "invalid_json")


def test_without_a_login_it_is_401_and_without_the_csrf_token_403(user):
    assert Client().get("/preferences").status_code == 401
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = put(client, {"theme": "dark"})
    assert (response.status_code, response.json()["code"]) == (403, "csrf_failed")
    assert not Preferences.objects.exists()


def test_the_service_refuses_an_unknown_theme_as_a_domain_error(user):
    with pytest.raises(InvalidTheme) as refused:
        preferences_set(user=user, theme="neon")
    assert refused.value.field == "theme" and "`system`, `light`, `dark`" in refused.value.detail


def test_the_schema_names_the_models_themes():
    assert set(get_args(ThemeName)) == set(Theme.values)
