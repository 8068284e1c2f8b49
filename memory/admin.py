from __future__ import annotations

from django.contrib import admin

from conversations.admin import ReadOnlyAdmin
from memory.models import Summary


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = ["session", "through_message_id", "tokens", "created_at"]
    list_select_related = ["session__user", "session__agent"]
    date_hierarchy = "created_at"
    search_fields = ["text", "session__user__username", "session__chat_id"]
    fields = ["session", "through_message", "tokens", "created_at", "text"]
    readonly_fields = fields
