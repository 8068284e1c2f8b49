"""The Content-Security-Policy of the pages (buddy/csp.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def directives(response) -> dict[str, str]:
    policy = response["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in policy.split(";"))


def test_the_page_allows_scripts_styles_and_media_from_itself_only(client, user):
    client.force_login(user)
    policy = directives(client.get("/"))
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["img-src"] == "'self'" and policy["media-src"] == "'self'"
    assert policy["default-src"] == "'none'" and policy["object-src"] == "'none'"
    assert policy["connect-src"] == "'self' ws://testserver"
    assert policy["frame-ancestors"] == "'none'" and policy["base-uri"] == "'none'"


def test_media_hosts_are_allowed_for_images_and_media_only(client, user, settings):
    settings.BUDDY_MEDIA_HOSTS = ["media.example", "cdn.example:8443"]
    client.force_login(user)
    policy = directives(client.get("/"))
    assert policy["img-src"] == "'self' https://media.example https://cdn.example:8443"
    assert policy["media-src"] == policy["img-src"]
    assert "media.example" not in policy["script-src"] + policy["connect-src"]


def test_the_login_page_has_it_too_and_json_does_not_need_it(client):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]
    assert "Content-Security-Policy" not in client.get("/healthz")
