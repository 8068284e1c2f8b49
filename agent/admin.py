"""Scheduled prompts in the admin, each with its runs (read-only). The admin holds a schedule to the
rules every other way of making one does (README, Limits): its text, its interval and the active
schedules of one user."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from agent.models import ScheduledPrompt, ScheduledRun
from agent.schedules import MAX_EVERY_SECONDS, ScheduleError, schedule_room_check, schedule_text_check


class ScheduledPromptForm(forms.ModelForm):
    class Meta:
        model = ScheduledPrompt
        fields = ["user", "agent", "chat_id", "text", "next_run_at", "every_seconds", "enabled"]

    def clean_text(self) -> str:
        text = self.cleaned_data.get("text")
        try:
            schedule_text_check(text)
        except ScheduleError as error:
            raise forms.ValidationError(str(error)) from None
        return text.strip()

    def clean_every_seconds(self) -> int | None:
        every_seconds = self.cleaned_data.get("every_seconds")
        if every_seconds is not None and every_seconds > MAX_EVERY_SECONDS:
            raise forms.ValidationError(f"At most {MAX_EVERY_SECONDS} seconds (ten years).")
        return every_seconds

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        user = cleaned.get("user")
        # Only a schedule that becomes active counts: one already active keeps its place.
        becomes_active = cleaned.get("enabled") and not (self.instance.pk and self.initial.get("enabled"))
        if user is not None and becomes_active:
            try:
                schedule_room_check(user=user, exclude_pk=self.instance.pk)
            except ScheduleError as error:
                self.add_error("enabled", str(error))
        return cleaned


class ScheduledRunInline(admin.TabularInline):
    model = ScheduledRun
    extra = 0
    can_delete = False
    fields = ["due_at", "status", "prompt", "detail", "created_at"]
    readonly_fields = fields
    ordering = ["-due_at"]

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(ScheduledPrompt)
class ScheduledPromptAdmin(admin.ModelAdmin):
    form = ScheduledPromptForm
    list_display = ["text", "user", "agent", "chat_id", "next_run_at", "every_seconds", "enabled", "last_run_at"]
    list_filter = ["enabled", "agent"]
    search_fields = ["text", "user__username"]
    list_select_related = ["user", "agent"]
    readonly_fields = ["last_run_at", "created_at"]
    inlines = [ScheduledRunInline]
