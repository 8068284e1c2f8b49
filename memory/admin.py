from __future__ import annotations

from django.contrib import admin

from conversations.admin import ReadOnlyAdmin
from memory.models import Note, NoteVersion, Summary


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = ["session", "through_message_id", "tokens", "created_at"]
    list_select_related = ["session__user", "session__agent"]
    date_hierarchy = "created_at"
    search_fields = ["text", "session__user__username", "session__chat_id"]
    fields = ["session", "through_message", "tokens", "created_at", "text"]
    readonly_fields = fields


@admin.register(Note)
class NoteAdmin(ReadOnlyAdmin):
    list_display = ["path", "scope", "user", "session", "updated_by", "updated_at"]
    list_filter = ["scope", "updated_by"]
    list_select_related = ["user", "session__agent", "session__user"]
    search_fields = ["path", "content", "user__username", "session__chat_id"]
    fields = ["user", "scope", "session", "path", "updated_by", "updated_at", "source_message", "content"]
    readonly_fields = fields


@admin.register(NoteVersion)
class NoteVersionAdmin(ReadOnlyAdmin):
    list_display = ["path", "scope", "user", "session", "changed_by", "changed_at", "source_message_id"]
    list_filter = ["scope", "changed_by"]
    list_select_related = ["user", "session__agent", "session__user"]
    date_hierarchy = "changed_at"
    search_fields = ["path", "before", "after", "user__username", "session__chat_id"]
    fields = ["user", "scope", "session", "path", "changed_by", "changed_at", "source_message", "before", "after"]
    readonly_fields = fields
