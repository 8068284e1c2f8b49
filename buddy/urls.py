from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from buddy.api import api
from buddy.login import LoginView, ThrottledAdminAuthenticationForm
from buddy.views import healthz

handler400 = "buddy.views.bad_request"

admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("healthz", healthz, name="healthz"),
    path("", include("web.urls")),
    path("", api.urls),
]
