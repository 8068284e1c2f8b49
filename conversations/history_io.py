"""JSON Lines import and export of a session's archive (README, "Commands").

Both stream: the file is read twice (validate, then import) and never held whole, so memory stays
flat however long the history is. Lines of other records that travel with a chat (memory notes) are
read by an `ExtraLines` the caller passes in.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Protocol

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations.content import dumps_compact, validate_content
from conversations.models import HistoryImport, Message, Session
from conversations.refs import ChatRef
from conversations.services import message_build, messages_bulk_append, session_get_or_create

IMPORT_BATCH = 1000


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: JSON has no infinity, and PostgreSQL's jsonb refuses it
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class ImportRefused(ValueError):
    """The file is valid but importing it would be wrong (nothing in it, or already in the chat)."""


class ImportLineError(ValueError):
    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number


@dataclass(frozen=True)
class ImportLine:
    role: str
    content: list[dict[str, Any]]
    created_at: datetime | None


@dataclass(frozen=True)
class ExtraLine:
    """A line that is not a message but a record another app carries with the chat (`{"note": {...}}`)."""

    line_number: int
    kind: str
    data: Any


class ExtraLines(Protocol):
    """Reads the extra records of one kind (e.g. memory notes): `check` each as it is validated (raise
    ValueError saying why it is wrong), `apply` them after the messages, in the import's transaction
    (raise ImportRefused to undo the whole import). `message_ids` are the imported messages' ids in
    file order."""

    kinds: frozenset[str]

    def check(self, *, kind: str, data: Any, messages_before: int) -> None: ...

    def apply(self, *, session: Session, lines: list[ExtraLine], message_ids: list[int]) -> None: ...


def parse_line(line_number: int, line: str, extra_kinds: frozenset[str] = frozenset()) -> ImportLine | ExtraLine:
    try:
        record = json.loads(line, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        # exc.msg alone may end mid-sentence ("Invalid control character at"): say where.
        reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise ImportLineError(line_number, f"not valid JSON ({reason})") from exc
    except RecursionError:
        raise ImportLineError(line_number, "nested too deeply") from None
    except ValueError as exc:  # a number out of range, NaN, an integer of thousands of digits
        raise ImportLineError(line_number, f"not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ImportLineError(line_number, "expected a JSON object")
    if len(record) == 1 and next(iter(record)) in extra_kinds:
        kind = next(iter(record))
        return ExtraLine(line_number=line_number, kind=kind, data=record[kind])
    unknown = set(record) - {"role", "content", "created_at"}
    if unknown:
        raise ImportLineError(line_number, f"unknown field(s): {', '.join(sorted(unknown))}")
    try:
        content = validate_content(record.get("role"), record.get("content"))
    except ValueError as exc:
        raise ImportLineError(line_number, str(exc)) from exc
    created_at = None
    if record.get("created_at") is not None:
        raw = record["created_at"]
        try:
            created_at = parse_datetime(raw) if isinstance(raw, str) else None
            if created_at is not None:
                if timezone.is_naive(created_at):
                    created_at = timezone.make_aware(created_at, UTC)
                created_at = created_at.astimezone(UTC)
        except (ValueError, OverflowError):  # 2026-02-30, year 0, 0001-01-01T00:00+05:00
            created_at = None
        if created_at is None:
            raise ImportLineError(line_number, f"created_at is not a real ISO-8601 date-time: {str(raw)[:40]!r}")
    return ImportLine(role=record["role"], content=content, created_at=created_at)


def _lines(stream: IO[str] | IO[bytes]) -> Iterator[tuple[int, str]]:
    """The file's lines, each read with a bound (BUDDY_IMPORT_MESSAGE_BYTES), so one huge line cannot
    take the memory; a binary stream is decoded line by line, so a bad byte names its line."""
    limit = settings.BUDDY_IMPORT_MESSAGE_BYTES
    line_number = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        line_number += 1
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if len(raw) <= limit:
                    raise ImportLineError(line_number, f"not UTF-8 text ({exc.reason})") from None
                line = raw.decode("utf-8", errors="ignore")  # cut mid-character: the size is the error
        else:
            line = raw
        if len(line.rstrip("\r\n").encode("utf-8", errors="surrogatepass")) > limit:
            raise ImportLineError(line_number, f"longer than {limit:,} bytes (BUDDY_IMPORT_MESSAGE_BYTES)")
        yield line_number, line


def iter_lines(
    stream: IO[str] | IO[bytes], extra_kinds: frozenset[str] = frozenset()
) -> Iterator[tuple[int, ImportLine | ExtraLine]]:
    for line_number, line in _lines(stream):
        if line.strip():
            yield line_number, parse_line(line_number, line, extra_kinds)


@dataclass(frozen=True)
class Validated:
    count: int
    digest: str  # of the messages as parsed: the same history gives the same digest, however formatted
    first: ImportLine | None


def history_validate(
    stream: IO[str] | IO[bytes], progress: Callable[[int], None] | None = None, extra: ExtraLines | None = None
) -> Validated:
    """Validate every line; raises ImportLineError on the first bad one. `count` counts the messages.
    Extra lines (memory notes) come after every message: one before a message is refused."""
    count = 0
    digest = hashlib.sha256()
    first: ImportLine | None = None
    first_extra: ExtraLine | None = None
    for line_number, line in iter_lines(stream, extra.kinds if extra else frozenset()):
        if isinstance(line, ExtraLine):
            assert extra is not None
            first_extra = first_extra or line
            try:
                extra.check(kind=line.kind, data=line.data, messages_before=count)
            except ValueError as exc:
                raise ImportLineError(line_number, f"{line.kind}: {exc}") from None
            digest.update(dumps_compact({line.kind: line.data}).encode("utf-8"))
        else:
            if first_extra is not None:
                raise ImportLineError(
                    first_extra.line_number,
                    f"{first_extra.kind}: a {first_extra.kind} line comes before the message on line {line_number}; "
                    f"{first_extra.kind} lines come after all the messages",
                )
            count += 1
            first = first or line
            created_at = line.created_at.isoformat() if line.created_at else None
            digest.update(dumps_compact([line.role, line.content, created_at]).encode("utf-8"))
        digest.update(b"\n")
        if progress and line_number % IMPORT_BATCH == 0:
            progress(line_number)
    return Validated(count=count, digest=digest.hexdigest(), first=first)


@transaction.atomic
def history_import_once(
    *,
    user: AbstractBaseUser,
    chat: ChatRef,
    stream: IO[str] | IO[bytes],
    validated: Validated,
    progress: Callable[[int], None] | None = None,
    extra: ExtraLines | None = None,
) -> tuple[Session, int]:
    """Import a validated file into the user's `chat`, creating the chat in the same transaction (a failed
    import leaves no empty chat); UnknownAgent (conversations.services) when its agent does not exist.
    Refuses (ImportRefused) a file with no messages, and a history the chat already holds: the same
    messages imported before, or the file's first message already there."""
    if validated.first is None:
        raise ImportRefused("the file holds no messages")
    session = session_get_or_create(user=user, agent_slug=chat.agent, chat_id=chat.chat_id)
    earlier = HistoryImport.objects.filter(session=session, digest=validated.digest).first()
    if earlier is not None:
        raise ImportRefused(
            f"these {earlier.messages:,} messages were already imported into this chat on "
            f"{earlier.created_at:%Y-%m-%d %H:%M} UTC; importing them again would double them"
        )
    first = validated.first
    if first.created_at is not None and any(
        content == first.content
        for content in Message.objects.filter(
            session=session, created_at=first.created_at, role=first.role
        ).values_list("content", flat=True)
    ):
        raise ImportRefused(
            "the chat already holds the file's first message (same role, time and content): it was exported "
            "from this chat or imported into it before; importing it again would double it"
        )
    imported = history_import(session=session, stream=stream, progress=progress, extra=extra)
    if imported != validated.count:
        raise ImportRefused(
            f"the file changed while it was imported ({validated.count} lines validated, {imported} read)"
        )
    HistoryImport.objects.create(session=session, digest=validated.digest, messages=imported)
    return session, imported


def history_import(
    *,
    session: Session,
    stream: IO[str] | IO[bytes],
    progress: Callable[[int], None] | None = None,
    extra: ExtraLines | None = None,
) -> int:
    """Append every message of an already validated file to the session, then hand its extra lines to
    `extra`, in one transaction."""
    extra_lines: list[ExtraLine] = []

    def messages() -> Iterable[Message]:
        for line_number, line in iter_lines(stream, extra.kinds if extra else frozenset()):
            if progress and line_number % IMPORT_BATCH == 0:
                progress(line_number)
            if isinstance(line, ExtraLine):
                extra_lines.append(line)
                continue
            yield message_build(session=session, role=line.role, content=line.content, created_at=line.created_at)

    with transaction.atomic():
        imported = messages_bulk_append(messages=messages(), batch_size=IMPORT_BATCH)
        if extra is not None and extra_lines:
            newest = Message.objects.filter(session=session).order_by("-id").values_list("id", flat=True)
            extra.apply(session=session, lines=extra_lines, message_ids=list(reversed(newest[:imported])))
        return imported


def history_export(*, session: Session, chunk_size: int = 2000) -> Iterator[str]:
    """One JSON line per archived message, oldest first, read in keyset pages."""
    after_id = 0
    while True:
        page = list(
            Message.objects.filter(session=session, id__gt=after_id)
            .order_by("id")
            .values_list("id", "role", "content", "created_at")[:chunk_size]
        )
        if not page:
            return
        for message_id, role, content, created_at in page:
            record = {"role": role, "content": content, "created_at": created_at.isoformat()}
            yield json.dumps(record, ensure_ascii=False)
            after_id = message_id
