"""What a question says besides its words: who said it, and when.

- **Speakers.** A transcript of several people, imported into a chat, starts each message with its
  speaker's name ("Caroline: I went to a support group yesterday"). A question that names one of the
  chat's speakers ("What did Caroline research?") is almost always answered by that speaker's own
  words, so the search ranks that speaker's messages first (memory.search.SPEAKER_BOOST).
- **Dates.** A question that names a day ("on 13 October 2023", "October 13, 2023", "2023-10-13") or a
  month of a year ("in January 2024") is about what was said then: the messages of that span join
  the candidates and rank higher (memory.search.DATE_BOOST).

Both are read from the question's text alone, the same on every backend.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from textsearch.speakers import LABEL_RE
from textsearch.text import fold

# A label is a speaker of the chat when it starts at least this share of the messages looked at.
SPEAKER_SHARE = 0.2


def speaker_label(text: str) -> str | None:
    """The speaker label a message starts with ("Caroline" of "Caroline: Hi"), folded, or None."""
    match = LABEL_RE.match(text)
    return fold(match.group(1)) if match else None


def speakers(starts: Iterable[str]) -> set[str]:
    """The chat's speakers: labels that start at least SPEAKER_SHARE of these message starts."""
    starts = list(starts)
    counts = Counter(label for text in starts if (label := speaker_label(text)))
    return {label for label, count in counts.items() if count >= max(2, SPEAKER_SHARE * len(starts))}


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", fold(text))


def named_speaker(query: str, chat_speakers: set[str]) -> str | None:
    """The one speaker of the chat the query names (all the words of its label, in order), or None
    when it names none or several."""
    words = " " + " ".join(_words(query)) + " "
    named = [label for label in chat_speakers if f" {' '.join(_words(label))} " in words]
    return named[0] if len(named) == 1 else None


def without_names(query: str, chat_speakers: set[str]) -> str:
    """The query without the chat's speakers' names (and their possessive), for the sentence encoder:
    names say whose message it is, which the speaker boost weighs; in a sentence vector they pull
    towards every message that names that person."""
    for label in chat_speakers:
        pattern = r"\b" + r"\s+".join(re.escape(word) for word in label.split()) + r"(?:['’]s)?\b"
        query = re.sub(pattern, " ", query, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", query).strip()


# --- dates ------------------------------------------------------------------------------------------
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        ),
        start=1,
    )
    for name in names.split()
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
# Most specific first: a day is read before the month-and-year inside it.
_DATE_PATTERNS = (
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>\d{4})-(?P<month_number>\d{2})-(?P<day>\d{2})\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
)
# Most spans one query brings (each is one bounded lookup).
MAX_DATE_SPANS = 3


def date_spans(query: str) -> list[tuple[datetime, datetime]]:
    """The spans of time the query names, as [start, end) in UTC: a day or a month of a year. Dates
    that do not exist ("February 30, 2026") name nothing."""
    spans: list[tuple[datetime, datetime]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(query):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            span = _span(match.groupdict())
            if span is not None:
                spans.append(span)
                taken.append((match.start(), match.end()))
    return spans[:MAX_DATE_SPANS]


def _span(groups: dict[str, str | None]) -> tuple[datetime, datetime] | None:
    try:
        year = int(groups["year"])
        month = int(groups["month_number"]) if groups.get("month_number") else _MONTHS[groups["month"].lower()]
        if groups.get("day"):
            first = date(year, month, int(groups["day"]))
            after = first + timedelta(days=1)
        else:
            first = date(year, month, 1)
            after = date(year + month // 12, month % 12 + 1, 1)
    except (KeyError, ValueError, OverflowError):
        return None
    return _midnight(first), _midnight(after)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
