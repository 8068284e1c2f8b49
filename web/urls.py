from __future__ import annotations

from django.urls import path

from web import views

urlpatterns = [path("", views.index, name="index")]
