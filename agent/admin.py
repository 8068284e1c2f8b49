"""Scheduled prompts in the admin, each with its runs (read-only)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from agent.models import ScheduledPrompt, ScheduledRun


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
    list_display = ["text", "user", "agent", "chat_id", "next_run_at", "every_seconds", "enabled", "last_run_at"]
    list_filter = ["enabled", "agent"]
    search_fields = ["text", "user__username"]
    list_select_related = ["user", "agent"]
    readonly_fields = ["last_run_at", "created_at"]
    inlines = [ScheduledRunInline]
