from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from buddy.api import api
from buddy.views import healthz

handler400 = "buddy.views.bad_request"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("healthz", healthz, name="healthz"),
    path("", include("canvas.urls")),
    path("", api.urls),
]
