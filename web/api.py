"""`/preferences`: how the page looks for the signed-in person. Refusals are domain exceptions, which
buddy/api.py answers."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from conversations.schemas import ErrorOut
from web.schemas import PreferencesIn, PreferencesOut
from web.services import preferences_get, preferences_set

router = Router(tags=["preferences"])


@router.get("/preferences", response={200: PreferencesOut, 401: ErrorOut}, summary="The person's page preferences")
def preferences(request: HttpRequest):
    return PreferencesOut(theme=preferences_get(user=request.user).theme)


@router.put(
    "/preferences",
    response={200: PreferencesOut, **dict.fromkeys((401, 403, 413, 422), ErrorOut)},
    summary="Change the person's page preferences",
    description="The theme the page uses in every browser the person signs in to, from the next page load "
    "(the page that changes it applies it at once).",
)
def preferences_put(request: HttpRequest, payload: PreferencesIn):
    return PreferencesOut(theme=preferences_set(user=request.user, theme=payload.theme).theme)
