"""Logging in, with failed attempts limited per user name and per client address (README, Limits)."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponse

from agent.limits import RateLimited, login_attempt_check, login_failure_record


class ThrottledLoginMixin:
    """An authentication form that refuses to check a password while its name or address is over the
    limit of failed logins, and counts each failure. `throttled` holds the refusal, for the view."""

    throttled: RateLimited | None = None

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()
        address = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        try:
            login_attempt_check(username=username, address=address)
        except RateLimited as refusal:
            self.throttled = refusal
            raise ValidationError(str(refusal), code="throttled") from None
        try:
            return super().clean()
        except ValidationError as error:
            if error.code == "invalid_login":
                login_failure_record(username=username, address=address)
            raise


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    """The site's login page: a throttled attempt is answered 429 with Retry-After (the form says why)."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form) -> HttpResponse:
        response = super().form_invalid(form)
        if form.throttled is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.throttled.retry_after)
        return response
