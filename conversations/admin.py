"""Staff review of archived conversations. The archive is read-only here: inspect, never edit."""

from __future__ import annotations

import json

from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from conversations.content import tool_result_text
from conversations.models import (
    INPUT_PRICE,
    Agent,
    ApiToken,
    Message,
    ModelCall,
    Session,
    input_cost,
)
from conversations.prices import PRICED_FIELDS, calls_cost, money, price_for, prices
from conversations.tokens import api_tokens_revoke

TRANSCRIPT_MESSAGES = 200  # the newest ones on a session's page; the message list has them all
PREVIEW_CHARS = 160


class AdminStyles:
    css = {"all": ["buddy/admin.css"]}


def message_label(message: Message) -> str:
    """What a message is to a reader: a prompt, tool results (user-role by the API's rules), or the assistant."""
    blocks = message.content if isinstance(message.content, list) else []
    if message.role == Message.Role.USER and blocks and all(b.get("type") == "tool_result" for b in blocks):
        return "tool results"
    return "user" if message.role == Message.Role.USER else "assistant"


def message_preview(message: Message) -> str:
    """One line per message: its text, tool calls as `name(key=value, …)`, tool results as `→ result`."""
    parts = []
    for block in message.content if isinstance(message.content, list) else []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
            arguments = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in tool_input.items())
            parts.append(f"{block.get('name', '?')}({arguments})")
        elif kind == "tool_result":
            parts.append(("→ error: " if block.get("is_error") else "→ ") + tool_result_text(block.get("content")))
    return Truncator(" · ".join(parts).replace("\n", " ")).chars(PREVIEW_CHARS)


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
    list_display = ["__str__", "title", "user", "agent", "message_total", "messages_link", "created_at"]
    list_filter = ["agent", "created_at"]
    search_fields = ["title", "user__username", "user__first_name", "user__last_name", "chat_id"]
    list_select_related = ["user", "agent"]
    fields = [
        "title",
        "user",
        "agent",
        "chat_id",
        "created_at",
        "related",
        "usage",
        "prompt_cache",
        "transcript",
        "window_start_id",
    ]
    readonly_fields = fields
    Media = AdminStyles

    @admin.display(description="see also")
    def related(self, obj: Session) -> SafeString:
        def changelist(name: str) -> str:
            return reverse(f"admin:{name}_changelist") + f"?session__id__exact={obj.pk}"

        links = [(changelist("conversations_message"), f"all {obj.messages.count()} messages")]
        try:
            canvas = obj.canvas
        except ObjectDoesNotExist:
            canvas = None
        if canvas is not None:
            links.append((reverse("admin:canvas_canvasstate_change", args=[obj.pk]), "canvas"))
        links.append((changelist("conversations_modelcall"), f"{obj.model_calls.count()} model calls"))
        summaries = obj.summaries.count()
        if summaries:
            links.append((changelist("memory_summary"), "summary" if summaries == 1 else f"{summaries} summaries"))
        return format_html_join(" · ", '<a href="{}">{}</a>', links)

    @admin.display(description="transcript")
    def transcript(self, obj: Session) -> SafeString:
        newest = list(obj.messages.order_by("-id")[: TRANSCRIPT_MESSAGES + 1])
        more = len(newest) > TRANSCRIPT_MESSAGES
        messages = list(reversed(newest[:TRANSCRIPT_MESSAGES]))
        if not messages:
            return format_html("{}", "(no messages)")
        rows = format_html_join(
            "",
            '<li class="buddy-turn buddy-role-{}" id="message-{}"><p class="buddy-meta"><a href="{}">#{}</a> '
            "<strong>{}</strong> <time>{}</time></p>{}</li>",
            (
                (
                    message_label(message).replace(" ", "-"),
                    message.pk,
                    reverse("admin:conversations_message_change", args=[message.pk]),
                    message.pk,
                    message_label(message),
                    f"{message.created_at:%Y-%m-%d %H:%M:%S} UTC",
                    _render_blocks(message),
                )
                for message in messages
            ),
        )
        note = format_html(
            '<p class="buddy-meta">The newest {} messages; the message list has every one.</p>', TRANSCRIPT_MESSAGES
        )
        return format_html('{}<ol class="buddy-transcript">{}</ol>', note if more else "", rows)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description="messages", ordering="message_total")
    def message_total(self, obj: Session) -> int:
        return obj.message_total

    @admin.display(description="")
    def messages_link(self, obj: Session) -> str:
        url = reverse("admin:conversations_message_changelist") + f"?session__id__exact={obj.pk}"
        return format_html('<a href="{}">view messages</a>', url)

    @admin.display(description="usage (every model call)")
    def usage(self, obj: Session) -> str:
        """The chat's tokens by kind over all its model calls, and their cost where BUDDY_PRICES prices them."""
        calls = obj.model_calls.all()
        totals = calls.aggregate(calls=Count("id"), **{name: Sum(name) for name in PRICED_FIELDS})
        tokens = usage_tokens(totals)
        cost = calls_cost(calls)
        return f"{totals['calls']:,} model calls: {tokens}" + (f"; cost {cost_text(cost)}" if cost else "")

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


def usage_tokens(usage: dict) -> str:
    """Token counts of a call (or a sum of calls) as a reader takes them in: what went in, what came out."""
    figures = {name: usage.get(name) or 0 for name in PRICED_FIELDS}
    return (
        f"{figures['input_tokens']:,} uncached input, {figures['cache_read_input_tokens']:,} cache read, "
        f"{figures['cache_creation_5m_input_tokens']:,} + {figures['cache_creation_1h_input_tokens']:,} cache "
        f"written (5 min + 1 h), {figures['output_tokens']:,} output tokens"
    )


def cost_text(cost) -> str:
    unpriced = f" ({cost.unpriced_calls:,} calls of models BUDDY_PRICES does not price left out)"
    return money(cost.amount) + (unpriced if cost.unpriced_calls else "")


class TurnFilter(admin.SimpleListFilter):
    """`?turn=ID`: the messages of the turn that message ID started — from it to the next turn start."""

    title = "turn"
    parameter_name = "turn"

    def _prompt_id(self) -> int | None:
        value = self.value()
        return int(value) if value and value.isdigit() and len(value) <= 18 else None

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, f"the turn of #{value}")] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Message]) -> QuerySet[Message]:
        if not self.value():
            return queryset
        prompt_id = self._prompt_id()
        if prompt_id is None:
            return queryset.none()
        session_id = Message.objects.filter(pk=prompt_id).values_list("session_id", flat=True).first()
        if session_id is None:
            return queryset.none()
        following = (
            Message.objects.filter(session_id=session_id, is_turn_start=True, id__gt=prompt_id)
            .order_by("id")
            .values_list("id", flat=True)
            .first()
        )
        turn = queryset.filter(session_id=session_id, id__gte=prompt_id)
        return turn.filter(id__lt=following) if following is not None else turn


def _render_block(block: dict) -> str:
    kind = block.get("type")
    if kind == "text":
        return format_html('<div class="buddy-text">{}</div>', block.get("text", ""))
    if kind == "tool_use":
        return format_html(
            '<div class="buddy-tool"><strong>tool call</strong> <code>{}</code> (<code>{}</code>)'
            '<pre class="buddy-pre">{}</pre></div>',
            block.get("name", ""),
            block.get("id", ""),
            json.dumps(block.get("input", {}), ensure_ascii=False, indent=2),
        )
    if kind == "tool_result":
        return format_html(
            '<div class="buddy-tool"><strong>tool result</strong> for <code>{}</code>{}'
            '<pre class="buddy-pre">{}</pre></div>',
            block.get("tool_use_id", ""),
            " (error)" if block.get("is_error") else "",
            tool_result_text(block.get("content")),
        )
    return format_html('<pre class="buddy-pre">{}</pre>', json.dumps(block, ensure_ascii=False, indent=2))


def _render_blocks(message: Message) -> SafeString:
    blocks = message.content if isinstance(message.content, list) else []
    return format_html_join("", "{}", ((_render_block(block),) for block in blocks if isinstance(block, dict)))


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "sent", "chat", "kind", "preview", "tokens"]
    list_filter = [TurnFilter, "role", "session__agent", "session__user", "created_at"]
    search_fields = ["content", "session__user__username", "session__chat_id"]
    date_hierarchy = "created_at"
    list_select_related = ["session__user", "session__agent"]
    fields = ["session_link", "kind", "created_at", "tokens", "is_turn_start", "rendered_content"]
    readonly_fields = fields
    show_full_result_count = False  # COUNT(*) over a large archive on every page load is not free
    Media = AdminStyles

    @admin.display(description="sent", ordering="created_at")
    def sent(self, obj: Message) -> str:
        return f"{obj.created_at:%Y-%m-%d %H:%M}"

    @admin.display(description="chat", ordering="session__chat_id")
    def chat(self, obj: Message) -> str:
        return str(obj.session)

    @admin.display(description="role", ordering="role")
    def kind(self, obj: Message) -> str:
        return message_label(obj)

    @admin.display(description="content")
    def preview(self, obj: Message) -> str:
        return message_preview(obj)

    @admin.display(description="session")
    def session_link(self, obj: Message) -> SafeString:
        url = reverse("admin:conversations_session_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a> (its transcript)', url, obj.session)

    @admin.display(description="content")
    def rendered_content(self, obj: Message) -> SafeString:
        return _render_blocks(obj)


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = [
        "when",
        "session",
        "turn",
        "model",
        "input",
        "cache_read",
        "writes",
        "output",
        "ms",
        "stop",
        "failed",
    ]
    list_filter = ["kind", "model", "created_at"]
    date_hierarchy = "created_at"
    list_select_related = ["session__user", "session__agent"]
    readonly_fields = ["turn", "tokens", "cost", "input_cost"]
    Media = AdminStyles

    def get_list_display(self, request: HttpRequest) -> list[str]:
        """With BUDDY_PRICES, each call's cost too."""
        columns = list(super().get_list_display(request))
        return [*columns[:-1], "cost", columns[-1]] if prices() else columns

    @admin.display(description="turn", ordering="prompt_message_id")
    def turn(self, obj: ModelCall) -> str:
        """The messages of the turn this call served; a summary call serves none, and says so."""
        if obj.prompt_message_id is None:
            return obj.kind if obj.kind == ModelCall.Kind.SUMMARY else "—"
        url = reverse("admin:conversations_message_changelist") + f"?turn={obj.prompt_message_id}"
        return format_html('<a href="{}">turn of #{}</a>', url, obj.prompt_message_id)

    @admin.display(description="tokens")
    def tokens(self, obj: ModelCall) -> str:
        return usage_tokens({name: getattr(obj, name) for name in PRICED_FIELDS})

    @admin.display(description="cost")
    def cost(self, obj: ModelCall) -> str:
        """In money where BUDDY_PRICES prices the call's model; else its tokens are the cost."""
        price = price_for(obj.model) if prices() else None
        if price is None:
            return "not priced (BUDDY_PRICES)" if prices() else "in tokens (BUDDY_PRICES is not set)"
        return money(price.cost({name: getattr(obj, name) for name in PRICED_FIELDS}))

    @admin.display(description="when", ordering="created_at")
    def when(self, obj: ModelCall) -> str:
        return f"{obj.created_at:%Y-%m-%d %H:%M}"

    # Short headings, so that every column fits a laptop screen beside the filters.
    @admin.display(description="input", ordering="input_tokens")
    def input(self, obj: ModelCall) -> int:
        return obj.input_tokens

    @admin.display(description="cache read", ordering="cache_read_input_tokens")
    def cache_read(self, obj: ModelCall) -> int:
        return obj.cache_read_input_tokens

    @admin.display(description="writes 5m/1h", ordering="cache_creation_input_tokens")
    def writes(self, obj: ModelCall) -> str:
        """Cache writes per lifetime (BUDDY_CACHE_TTL)."""
        return f"{obj.cache_creation_5m_input_tokens}/{obj.cache_creation_1h_input_tokens}"

    @admin.display(description="output", ordering="output_tokens")
    def output(self, obj: ModelCall) -> int:
        return obj.output_tokens

    @admin.display(description="ms", ordering="latency_ms")
    def ms(self, obj: ModelCall) -> int:
        return obj.latency_ms

    @admin.display(description="stop", ordering="stop_reason")
    def stop(self, obj: ModelCall) -> str:
        return obj.stop_reason

    @admin.display(description="input cost (base input tokens)")
    def input_cost(self, obj: ModelCall) -> str:
        """The call's input in base input tokens (reads 0.1×, 5-minute writes 1.25×, 1-hour writes 2×)."""
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
        count = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"Revoked {count} token(s).")
