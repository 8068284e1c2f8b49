from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from conversations.admin import ReadOnlyAdmin
from conversations.admin import SessionAdmin as ArchiveSessionAdmin
from conversations.models import Session
from memory.models import Note, NoteScope, NoteVersion, Summary

NOTE_PREVIEW_CHARS = 200


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


def _changelist(model: str, **query: object) -> str:
    return reverse(f"admin:memory_{model}_changelist") + "?" + urlencode(query)


# A session's page (conversations.admin) with the chat's memory notes: the archive's admin cannot know
# them (conversations sits below memory), so memory registers the page again with them added.
admin.site.unregister(Session)


@admin.register(Session)
class SessionAdmin(ArchiveSessionAdmin):
    fields = [*ArchiveSessionAdmin.fields]
    fields.insert(fields.index("transcript"), "notes")
    readonly_fields = fields

    @admin.display(description="memory notes")
    def notes(self, obj: Session) -> SafeString:
        """The chat's notes, each with its last change, the message its text came from and its versions;
        then links to the versions of every note of the chat (deleted ones too) and to the user's profile."""
        notes = Note.objects.filter(session=obj, scope=NoteScope.CHAT).order_by("path")
        rows = format_html_join(
            "",
            '<tr><th scope="row"><a href="{}">{}</a></th><td class="buddy-text">{}</td><td>{} · {}</td>'
            '<td>{}</td><td><a href="{}">versions</a></td></tr>',
            (
                (
                    reverse("admin:memory_note_change", args=[note.pk]),
                    note.path,
                    Truncator(note.content).chars(NOTE_PREVIEW_CHARS),
                    note.updated_by,
                    f"{note.updated_at:%Y-%m-%d %H:%M} UTC",
                    _source_link(note.source_message_id),
                    _changelist("noteversion", session__id__exact=obj.pk, path=note.path),
                )
                for note in notes
            ),
        )
        table = (
            format_html(
                '<table class="buddy-notes"><thead><tr><th scope="col">path</th><th scope="col">text</th>'
                '<th scope="col">last change</th><th scope="col">from</th><th scope="col">history</th></tr>'
                "</thead><tbody>{}</tbody></table>",
                rows,
            )
            if notes
            else format_html("<p>{}</p>", "(this chat has no notes)")
        )
        profile = Note.objects.filter(user_id=obj.user_id, scope=NoteScope.PROFILE).count()
        links = format_html(
            '<p class="buddy-meta"><a href="{}">every version of this chat\'s notes</a> (deleted notes too) · '
            '<a href="{}">{} profile notes of {}</a> (shared by all their chats)</p>',
            _changelist("noteversion", session__id__exact=obj.pk),
            _changelist("note", user__id__exact=obj.user_id, scope__exact=NoteScope.PROFILE),
            profile,
            obj.user,
        )
        return format_html("{}{}", table, links)


def _source_link(message_id: int | None) -> str:
    if message_id is None:
        return "—"
    url = reverse("admin:conversations_message_change", args=[message_id])
    return format_html('<a href="{}">#{}</a>', url, message_id)
