"""A model's change to the user's profile notes, waiting for the user's yes (docs/memory.md).

The proposal stores the exact changes — each note's text as the change found it and as it leaves it —
and the question on the canvas is written here, by the server, from those stored changes: the whole
text a note will hold (or, for an edit, every changed line with the lines around it) and which chats
the change reaches. A yes applies exactly those changes, or nothing if a note no longer holds what
the question showed; the answer says which.
"""

from __future__ import annotations

import difflib
import secrets

from django.db import transaction

from conversations.models import Message, Session
from memory.models import NoteAuthor, NoteProposal, NoteScope
from memory.notes.paths import NOTE_MAX_BYTES, NoteChanged, NoteError, scope_of
from memory.notes.services import NoteChange, note_changes_apply

# The canvas reserves ids with this prefix for the server's questions (canvas.limits).
ELEMENT_ID_PREFIX = "memory-"
# Most note text one question shows: an edit's text before and after. Forgetting more at once is refused.
SHOWN_MAX_BYTES = 2 * NOTE_MAX_BYTES
DIFF_CONTEXT_LINES = 2
ELIDED = "…"
EVERY_CHAT = "every chat with every agent"


def _everywhere(path: str) -> bool:
    return scope_of(path) == NoteScope.PROFILE


def _text(text: str) -> str:
    return text if text else "(an empty note)"


def _diff(before: str, after: str) -> str:
    """Every changed line (`- ` goes, `+ ` comes) with DIFF_CONTEXT_LINES unchanged lines around it
    (`  `); `…` stands for unchanged lines not shown."""
    old, new = before.split("\n"), after.split("\n")
    lines: list[str] = []
    groups = difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(DIFF_CONTEXT_LINES)
    end = 0
    for group in groups:
        if group[0][1] > end:
            lines.append(ELIDED)
        for tag, old_start, old_end, new_start, new_end in group:
            if tag == "equal":
                lines.extend(f"  {line}" for line in old[old_start:old_end])
                continue
            lines.extend(f"- {line}" for line in old[old_start:old_end])
            lines.extend(f"+ {line}" for line in new[new_start:new_end])
        end = group[-1][2]
    if end < len(old):
        lines.append(ELIDED)
    return "\n".join(lines)


def _question(
    element_id: str, title: str, message: str, confirm_label: str, cancel_label: str = "Don't"
) -> dict[str, str]:
    return {
        "id": element_id,
        "title": title,
        "message": message,
        "confirm_label": confirm_label,
        "cancel_label": cancel_label,
    }


def _forget(element_id: str, gone: list[NoteChange]) -> dict[str, str]:
    shown = sum(len((change.expected or "").encode("utf-8")) for change in gone)
    if shown > SHOWN_MAX_BYTES:
        raise NoteError(
            f"that would forget {len(gone)} profile notes holding {shown:,} bytes at once; the user is shown "
            f"everything they would forget, at most {SHOWN_MAX_BYTES:,} bytes: delete fewer notes at a time"
        )
    if len(gone) == 1:
        [change] = gone
        message = (
            f"Delete your profile note {change.path}, so that no chat sees it any more. It holds:\n\n"
            f"{_text(change.expected or '')}"
        )
    else:
        listed = "\n\n".join(f"{change.path}:\n{_text(change.expected or '')}" for change in gone)
        message = f"Delete these {len(gone)} profile notes, so that no chat sees them any more:\n\n{listed}"
    return _question(element_id, "Forget in all chats?", message, "Forget", "Keep")


def _move(element_id: str, source: NoteChange, target: NoteChange) -> dict[str, str]:
    text = _text(target.result or "")
    if not _everywhere(source.path):
        message = (
            f"Move this chat's note {source.path} to your profile as {target.path}, where {EVERY_CHAT} sees "
            f"it:\n\n{text}"
        )
        return _question(element_id, "Remember in all chats?", message, "Remember")
    if not _everywhere(target.path):
        message = (
            f"Move your profile note {source.path} into this chat as {target.path}: it is removed from all "
            f"your chats and kept in this chat only. It holds:\n\n{text}"
        )
        return _question(element_id, "Keep in this chat only?", message, "Move")
    message = (
        f"Rename your profile note {source.path} to {target.path}; {EVERY_CHAT} still sees it. It holds:\n\n{text}"
    )
    return _question(element_id, "Rename a note in all chats?", message, "Rename")


def proposal_question(*, element_id: str, changes: list[NoteChange]) -> dict[str, str]:
    """The canvas confirmation (`canvas_show_confirmation` params) asking for `changes`, one memory
    command's changes of which at least one is a profile note's. Raises NoteError when it cannot show
    them whole."""
    kept = [change for change in changes if change.result is not None]
    gone = [change for change in changes if change.result is None]
    if not kept:
        return _forget(element_id, gone)
    if len(kept) != 1 or len(gone) > 1:
        raise ValueError(f"not the changes of one memory command: {[change.path for change in changes]}")
    [change] = kept
    if gone:
        return _move(element_id, gone[0], change)
    if change.expected is None:
        message = (
            f"Save this to your profile as {change.path}, where {EVERY_CHAT} sees it:\n\n{_text(change.result or '')}"
        )
        return _question(element_id, "Remember in all chats?", message, "Remember")
    message = (
        f"Change your profile note {change.path}, which {EVERY_CHAT} sees (- a line goes, "
        f"+ a line comes, {ELIDED} unchanged lines not shown):\n\n{_diff(change.expected, change.result or '')}"
    )
    return _question(element_id, "Change a note in all chats?", message, "Change")


def proposal_changes(proposal: NoteProposal) -> list[NoteChange]:
    return [NoteChange.from_json(item) for item in proposal.changes]


def note_proposal_create(*, session: Session, changes: list[NoteChange], source: Message | None) -> dict[str, str]:
    """Store `changes` as a proposal and return the confirmation that asks for it, written from what
    was stored (its id names the proposal). Raises NoteError when the changes cannot be shown whole."""
    proposal = NoteProposal.objects.create(
        session=session,
        element_id=f"{ELEMENT_ID_PREFIX}{secrets.token_hex(6)}",
        changes=[change.as_json() for change in changes],
        source_message=source,
    )
    return proposal_question(element_id=proposal.element_id, changes=proposal_changes(proposal))


@transaction.atomic
def note_proposal_answer(*, session: Session, element_id: str, confirmed: bool) -> NoteProposal | None:
    """Apply (confirmed) or drop (declined) the proposal behind the confirmation `element_id`; None if
    that confirmation is not a note's. Confirmed, its `outcome` says what happened: done as shown, or
    `failed` with why — nothing is applied when a note no longer holds what the question showed."""
    proposal = NoteProposal.objects.select_for_update().filter(session=session, element_id=element_id).first()
    if proposal is None or proposal.status != NoteProposal.Status.PENDING:
        return proposal
    if not confirmed:
        proposal.status = NoteProposal.Status.DECLINED
    else:
        try:
            note_changes_apply(
                user=session.user,
                session=session,
                changes=proposal_changes(proposal),
                by=NoteAuthor.MODEL,
                source=proposal.source_message,
            )
            proposal.status, proposal.outcome = NoteProposal.Status.APPLIED, "Done, exactly as shown."
        except NoteChanged as exc:
            proposal.status = NoteProposal.Status.FAILED
            proposal.outcome = f"Not done: the notes changed after this question was asked ({exc}). Nothing changed."
        except NoteError as exc:
            proposal.status, proposal.outcome = NoteProposal.Status.FAILED, f"Not done: {exc}. Nothing changed."
    proposal.save(update_fields=["status", "outcome"])
    return proposal
