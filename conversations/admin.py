"""Staff review of archived conversations. The archive is read-only here: inspect, never edit."""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from conversations.llm import INPUT_PRICE, input_cost
from conversations.models import Agent, ApiToken, Message, ModelCall, ScheduledPrompt, ScheduledRun, Session


class ReadOnlyAdmin(admin.ModelAdmin):
    """Inspect only: no add, no change, no delete (deleting a user still deletes their data)."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "avatar", "model", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "user", "agent", "chat_id", "message_total", "messages_link", "created_at"]
    list_filter = ["agent", "created_at"]
    search_fields = ["user__username", "chat_id"]
    list_select_related = ["user", "agent"]
    readonly_fields = [
        "user",
        "agent",
        "chat_id",
        "window_start_id",
        "turn_lease_expires_at",
        "created_at",
        "prompt_cache",
    ]
    exclude = ["turn_lease_id", "turn_cancel_requested"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description="messages", ordering="message_total")
    def message_total(self, obj: Session) -> int:
        return obj.message_total

    @admin.display(description="")
    def messages_link(self, obj: Session) -> str:
        url = reverse("admin:conversations_message_changelist") + f"?session__id__exact={obj.pk}"
        return format_html('<a href="{}">view messages</a>', url)

    @admin.display(description="prompt cache (every model call)")
    def prompt_cache(self, obj: Session) -> str:
        """What the cache lifetimes cost this chat: reads, writes per lifetime, input in base tokens."""
        usage = {
            name: value or 0
            for name, value in obj.model_calls.aggregate(**{name: Sum(name) for name in INPUT_PRICE}).items()
        }
        uncached = sum(usage.values())
        return format_html(
            "read {} · written with 5-minute lifetime {} · with 1-hour lifetime {} · uncached {} tokens; "
            "input cost {} base input tokens ({} of the same input without caching)",
            f"{usage['cache_read_input_tokens']:,}",
            f"{usage['cache_creation_5m_input_tokens']:,}",
            f"{usage['cache_creation_1h_input_tokens']:,}",
            f"{usage['input_tokens']:,}",
            f"{input_cost(usage):,.0f}",
            f"{input_cost(usage) / uncached:.0%}" if uncached else "—",
        )


def _render_block(block: dict) -> str:
    kind = block.get("type")
    if kind == "text":
        return format_html('<div class="buddy-text" style="white-space:pre-wrap">{}</div>', block.get("text", ""))
    if kind == "tool_use":
        return format_html(
            "<div><strong>tool call</strong> <code>{}</code> (<code>{}</code>)"
            '<pre style="white-space:pre-wrap">{}</pre></div>',
            block.get("name", ""),
            block.get("id", ""),
            json.dumps(block.get("input", {}), ensure_ascii=False, indent=2),
        )
    if kind == "tool_result":
        result = block.get("content", "")
        if isinstance(result, list):
            result = "\n".join(item.get("text", "") for item in result if isinstance(item, dict))
        return format_html(
            '<div><strong>tool result</strong> for <code>{}</code>{}<pre style="white-space:pre-wrap">{}</pre></div>',
            block.get("tool_use_id", ""),
            " (error)" if block.get("is_error") else "",
            result,
        )
    return format_html("<pre>{}</pre>", json.dumps(block, ensure_ascii=False, indent=2))


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "user", "agent", "chat", "role", "preview", "tokens"]
    list_filter = ["role", "session__agent", "session__user", "created_at"]
    search_fields = ["search_text", "session__user__username", "session__chat_id"]
    date_hierarchy = "created_at"
    list_select_related = ["session__user", "session__agent"]
    fields = ["session", "role", "created_at", "tokens", "is_turn_start", "rendered_content"]
    readonly_fields = fields
    show_full_result_count = False  # COUNT(*) over a large archive on every page load is not free

    @admin.display(ordering="session__user__username")
    def user(self, obj: Message) -> str:
        return obj.session.user.get_username()

    @admin.display(ordering="session__agent__slug")
    def agent(self, obj: Message) -> str:
        return obj.session.agent.slug

    @admin.display(ordering="session__chat_id")
    def chat(self, obj: Message) -> str:
        return obj.session.chat_id

    @admin.display(description="content")
    def preview(self, obj: Message) -> str:
        return Truncator(obj.search_text.replace("\n", " ")).chars(100)

    @admin.display(description="content")
    def rendered_content(self, obj: Message) -> str:
        blocks = obj.content if isinstance(obj.content, list) else []
        return format_html_join("", "{}", ((_render_block(block),) for block in blocks if isinstance(block, dict)))


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "session",
        "kind",
        "model",
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_5m_input_tokens",
        "cache_creation_1h_input_tokens",
        "input_cost",
        "output_tokens",
        "latency_ms",
        "stop_reason",
        "failed",
    ]
    list_filter = ["kind", "model", "created_at"]
    date_hierarchy = "created_at"
    list_select_related = ["session__user", "session__agent"]

    @admin.display(description="input cost (base input tokens)")
    def input_cost(self, obj: ModelCall) -> str:
        return f"{input_cost({name: getattr(obj, name) for name in INPUT_PRICE}):,.0f}"

    @admin.display(boolean=True)
    def failed(self, obj: ModelCall) -> bool:
        return bool(obj.error)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are listed and revoked (deleted) here; they are created only by `create_api_token`,
    the one place the token itself is shown."""

    list_display = ["prefix", "user", "created_at", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "prefix"]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]
    exclude = ["key_hash"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count, _ = queryset.delete()
        self.message_user(request, f"Revoked {count} token(s).")


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
