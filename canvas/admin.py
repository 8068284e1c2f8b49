from __future__ import annotations

import json

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from canvas.models import CanvasState
from canvas.selectors import SNAPSHOT_CONTENT_CHARS, element_content_summary


@admin.register(CanvasState)
class CanvasStateAdmin(admin.ModelAdmin):
    """Read-only: the canvas changes only through its service, under its lock, with a broadcast."""

    list_display = ("session", "element_count", "mode", "theme", "version", "updated_at")
    list_select_related = ("session__user", "session__agent")
    search_fields = ("session__user__username", "session__chat_id", "session__agent__slug")
    fields = ("session", "mode", "theme", "version", "updated_at", "element_list", "elements_json")
    readonly_fields = fields

    @admin.display(description="elements")
    def element_count(self, state: CanvasState) -> int:
        return len(state.elements)

    @admin.display(description="elements, in order")
    def element_list(self, state: CanvasState) -> str:
        if not state.elements:
            return "(empty)"
        rows = format_html_join(
            "",
            "<li><strong>{}</strong> <code>{}</code> {} — {}</li>",
            (
                (
                    element.get("type", "?"),
                    element.get("id", "?"),
                    element.get("title", ""),
                    element_content_summary(element)[:SNAPSHOT_CONTENT_CHARS],
                )
                for element in state.elements
            ),
        )
        return format_html("<ol>{}</ol>", rows)

    @admin.display(description="stored JSON")
    def elements_json(self, state: CanvasState) -> str:
        return format_html(
            '<pre style="white-space: pre-wrap">{}</pre>',
            json.dumps(state.elements, ensure_ascii=False, indent=2),
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: CanvasState | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: CanvasState | None = None) -> bool:
        # A new row would restart `version` below what open sockets hold, and they would ignore it.
        return False
