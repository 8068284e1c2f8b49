"""JSON Lines import and export of a session's archive (contract §7).

Both stream: the file is read twice (validate, then import) and never held whole, so memory stays
flat however long the history is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations.content import validate_content
from conversations.models import Message, Session
from conversations.services import message_build, messages_bulk_append

IMPORT_BATCH = 1000


class ImportLineError(ValueError):
    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number


@dataclass(frozen=True)
class ImportLine:
    role: str
    content: list[dict[str, Any]]
    created_at: datetime | None


def parse_line(line_number: int, line: str) -> ImportLine:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        # exc.msg alone may end mid-sentence ("Invalid control character at"): say where.
        reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise ImportLineError(line_number, f"not valid JSON ({reason})") from exc
    if not isinstance(record, dict):
        raise ImportLineError(line_number, "expected a JSON object")
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
        created_at = parse_datetime(raw) if isinstance(raw, str) else None
        if created_at is None:
            raise ImportLineError(line_number, f"created_at is not an ISO-8601 date-time: {raw!r}")
        if timezone.is_naive(created_at):
            created_at = timezone.make_aware(created_at, UTC)
    return ImportLine(role=record["role"], content=content, created_at=created_at)


def iter_lines(stream: IO[str]) -> Iterator[tuple[int, ImportLine]]:
    for line_number, line in enumerate(stream, start=1):
        if line.strip():
            yield line_number, parse_line(line_number, line)


def history_validate(stream: IO[str], progress: Callable[[int], None] | None = None) -> int:
    """Validate every line; raises ImportLineError on the first bad one. Returns the message count."""
    count = 0
    for count, (line_number, _) in enumerate(iter_lines(stream), start=1):  # noqa: B007
        if progress and line_number % IMPORT_BATCH == 0:
            progress(line_number)
    return count


def history_import(*, session: Session, stream: IO[str], progress: Callable[[int], None] | None = None) -> int:
    """Append every line of an already validated file to the session, in one transaction."""

    def messages() -> Iterable[Message]:
        for line_number, line in iter_lines(stream):
            if progress and line_number % IMPORT_BATCH == 0:
                progress(line_number)
            yield message_build(session=session, role=line.role, content=line.content, created_at=line.created_at)

    with transaction.atomic():
        return messages_bulk_append(messages=messages(), batch_size=IMPORT_BATCH)


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
