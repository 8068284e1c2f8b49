from __future__ import annotations

import pytest
from django.urls import reverse

from canvas.models import CanvasState
from canvas.services import canvas_apply

pytestmark = pytest.mark.django_db


def test_staff_read_a_canvas_as_a_list_of_elements_and_cannot_change_it(client, staff_user, session):
    canvas_apply(
        session=session, command="canvas_add_card", params={"id": "plan", "title": "<b>Plan</b>", "body": "go"}
    )
    canvas_apply(
        session=session, command="canvas_play_media", params={"id": "cat", "url": "/c.png", "media_type": "image"}
    )
    client.force_login(staff_user)
    listing = client.get(reverse("admin:canvas_canvasstate_changelist")).content.decode()
    assert "alice" in listing and ">2<" in listing  # two elements
    detail = client.get(reverse("admin:canvas_canvasstate_change", args=[session.pk])).content.decode()
    assert "&lt;b&gt;Plan&lt;/b&gt;" in detail and "<b>Plan</b>" not in detail  # text, never HTML
    assert "image /c.png" in detail
    assert 'name="_save"' not in detail  # read-only
    state = CanvasState.objects.get(session=session)
    response = client.post(reverse("admin:canvas_canvasstate_change", args=[session.pk]), {"theme": "hacked"})
    assert response.status_code == 403
    assert (
        client.post(reverse("admin:canvas_canvasstate_delete", args=[session.pk]), {"post": "yes"}).status_code == 403
    )
    state.refresh_from_db()
    assert state.theme == "" and len(state.elements) == 2
    assert client.get(reverse("admin:canvas_canvasstate_add")).status_code == 403
