"""Retrieval quality of history search on real conversations: LoCoMo's evidence recall@5 / recall@10.

    .venv/bin/python bench/recall.py [PATH]        # SQLite: var/bench/locomo.sqlite3, rebuilt each run
    .venv/bin/python bench/recall.py --across      # each question in its own chat and across all chats
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_locomo .venv/bin/python bench/recall.py

PATH is a LoCoMo file (default ../shared/data/locomo-dev.json); devtools/locomo.py reads it the way
../shared/data/README.md defines the figure. Each conversation is imported into a chat through the
write path (messages_bulk_append), every question is asked through memory.search.search_history
(limit 10), and a question counts as answered at k when one of its evidence turns is among the first
k results. Reported for each ranker: recall@5 and @10, overall and per category, and the median time
of a search. The rankers:

- `LIKE` phrase and `LIKE` per word: the original design (`search_text LIKE '%…%'`, newest first; one
  `LIKE` per word of 3+ letters, most words matched first);
- FTS5 baseline: SQLite FTS5 with porter stemming, an OR of the question's keywords, `bm25()` with
  each turn's neighbouring turns as a second column weighted 0.3;
- with `--across`, only two rows and how many chats a search ranks in full: each question asked in its
  own chat (search_history) and across all the user's chats (memory.search.across.search_all_chats,
  `GET /search`), where only a hit in the question's own chat can be its evidence; with `--sweep`
  also with CHATS_SEARCHED from 1 up to the number of chats;
- Buddy's search with its parts taken away one at a time (module constants and settings switched for
  the row), and as configured by default, right after the import (no vectors yet), with half of each
  chat indexed, and after indexing.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
if not os.environ.get("DATABASE_URL"):
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench' / 'locomo.sqlite3'}"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from devtools import locomo  # noqa: E402
from memory import search, semantic  # noqa: E402
from textsearch import ranking  # noqa: E402
from textsearch.text import QUERY_STOP_WORDS  # noqa: E402

KS = (5, 10)
# A ranker: (conversation index, question) → message indexes, best first.
Rank = Callable[[int, locomo.Question], list[int]]


class Chats:
    """The conversations imported as chats of one bench user, with message id ↔ index maps."""

    def __init__(self, conversations: list[locomo.Conversation]) -> None:
        from django.contrib.auth import get_user_model

        from conversations.models import Message, Session
        from conversations.services import message_build, messages_bulk_append, session_get_or_create

        call_command("migrate", verbosity=0)
        user, _ = get_user_model().objects.get_or_create(username="locomo-bench")
        Session.objects.filter(user=user).delete()
        self.sessions = []
        self.ids: list[list[int]] = []
        for number, conversation in enumerate(conversations):
            session = session_get_or_create(user=user, agent_slug="buddy", chat_id=f"locomo-{number}")
            messages_bulk_append(
                messages=(
                    message_build(session=session, role=role, content=text, created_at=created_at)
                    for role, text, created_at in conversation.messages
                )
            )
            self.sessions.append(session)
            self.ids.append(list(Message.objects.filter(session=session).order_by("id").values_list("id", flat=True)))
        self.index_of = [{message_id: index for index, message_id in enumerate(ids)} for ids in self.ids]

    def ranker(self) -> Rank:
        def rank(number: int, question: locomo.Question) -> list[int]:
            hits = search.search_history(session=self.sessions[number], query=question.text, limit=max(KS))
            return [self.index_of[number][hit.message_id] for hit in hits]

        return rank

    def index(self, *, share: float = 1.0) -> None:
        """Write the vectors of the first `share` of each chat's messages (semantic.vectors_fill writes
        every missing one; a share below 1 stops short, as a background job still running would)."""
        from conversations.models import Message
        from memory.selectors import MESSAGE_TEXT

        for session, ids in zip(self.sessions, self.ids, strict=True):
            if share >= 1:
                semantic.vectors_fill(session.pk)
                continue
            rows = list(
                Message.objects.filter(session=session, id__lte=ids[int(len(ids) * share) - 1])
                .order_by("id")
                .annotate(text=MESSAGE_TEXT)
                .values_list("id", "text")
            )
            semantic._write_batched(session.pk, rows, "")


def across_ranker(chats: Chats) -> Rank:
    """Search across all the bench user's chats; a hit in another chat than the question's is never its
    evidence (-1)."""
    from memory.search.across import search_all_chats

    numbers = {session.chat_id: number for number, session in enumerate(chats.sessions)}
    user = chats.sessions[0].user

    def rank(number: int, question: locomo.Question) -> list[int]:
        hits = search_all_chats(user=user, query=question.text, limit=max(KS))
        return [chats.index_of[number][hit.message_id] if numbers[hit.chat_id] == number else -1 for hit in hits]

    return rank


def across_rows(conversations: list[locomo.Conversation], chats: Chats, *, sweep: bool) -> None:
    """Each question in its own chat, then across all chats (with `sweep`, CHATS_SEARCHED from 1 up),
    after indexing, semantic search on; and the ratio of recall@10 across to recall@10 in its own chat."""
    from memory.search import across

    chats.index()
    own = evaluate(conversations, chats.ranker())
    report("in its own chat (`/memory/search`)", own)
    default = across.CHATS_SEARCHED
    for count in sorted({*(range(1, len(conversations) + 1) if sweep else ()), default}):
        across.CHATS_SEARCHED = count
        try:
            result = evaluate(conversations, across_ranker(chats))
        finally:
            across.CHATS_SEARCHED = default
        marker = " (default)" if count == default else ""
        report(f"across all chats (`/search`), {count} chats ranked in full{marker}", result)
        ratios = {k: result["at"][k] / own["at"][k] for k in KS}
        print(f"|   ratio to its own chat: @5 {ratios[5]:.3f}, @10 {ratios[10]:.3f} |", flush=True)


def like_ranker(chats: Chats, *, per_word: bool) -> Rank:
    """The original design's search: `LIKE '%phrase%'` newest first, or one `LIKE` per word."""
    from django.db.models import Case, IntegerField, Q, Value, When

    from conversations.models import Message

    def rank(number: int, question: locomo.Question) -> list[int]:
        messages = Message.objects.filter(session=chats.sessions[number])
        if not per_word:
            found = messages.filter(search_document__text__icontains=question.text).order_by("-id")
        else:
            words = {word for word in re.findall(r"\w+", question.text.lower()) if len(word) >= 3}
            if not words:
                return []
            matched = sum(
                (
                    Case(
                        When(search_document__text__icontains=word, then=Value(1)),
                        default=Value(0),
                        output_field=IntegerField(),
                    )
                )
                for word in words
            )
            condition = Q()
            for word in words:
                condition |= Q(search_document__text__icontains=word)
            found = messages.filter(condition).annotate(matched=matched).order_by("-matched", "-id")
        ids = found.values_list("id", flat=True)[: max(KS)]
        return [chats.index_of[number][message_id] for message_id in ids]

    return rank


def fts5_ranker(conversations: list[locomo.Conversation]) -> Rank:
    """The baseline of the issue that asked for this bench: FTS5, porter stemming, the OR of the
    question's keywords, bm25() with the neighbouring turns as a second column weighted 0.3."""
    database = sqlite3.connect(":memory:")
    database.execute("CREATE VIRTUAL TABLE turns USING fts5(text, neighbours, conversation UNINDEXED, tokenize=porter)")
    for number, conversation in enumerate(conversations):
        texts = [text for _, text, _ in conversation.messages]
        database.executemany(
            "INSERT INTO turns(rowid, text, neighbours, conversation) VALUES (?, ?, ?, ?)",
            [
                (
                    number * 100_000 + index,
                    text,
                    " ".join(texts[max(0, index - 1) : index] + texts[index + 1 : index + 2]),
                    number,
                )
                for index, text in enumerate(texts)
            ],
        )

    def rank(number: int, question: locomo.Question) -> list[int]:
        words = [word for word in re.findall(r"[a-z0-9]+", question.text.lower()) if word not in QUERY_STOP_WORDS]
        if not words:
            return []
        rows = database.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? AND conversation = ? ORDER BY bm25(turns, 1.0, 0.3) LIMIT ?",
            [" OR ".join(f'"{word}"' for word in words), number, max(KS)],
        ).fetchall()
        return [rowid - number * 100_000 for (rowid,) in rows]

    return rank


@contextmanager
def variant(*, semantic_search: str = "on", **constants: float) -> Iterator[None]:
    """Search with some of its constants changed (memory.search's, or textsearch.ranking's for BM25F
    and diversity), and BUDDY_SEMANTIC_SEARCH set."""
    modules = {name: ranking if hasattr(ranking, name) else search for name in constants}
    saved = {name: getattr(modules[name], name) for name in constants}
    for name, value in constants.items():
        setattr(modules[name], name, value)
    try:
        with override_settings(BUDDY_SEMANTIC_SEARCH=semantic_search):
            yield
    finally:
        for name, value in saved.items():
            setattr(modules[name], name, value)


def evaluate(conversations: list[locomo.Conversation], rank: Rank) -> dict:
    found = dict.fromkeys(KS, 0)
    by_category: dict[int, list[int]] = {category: [0, 0, 0] for category in locomo.CATEGORIES}
    times: list[float] = []
    for number, conversation in enumerate(conversations):
        for question in conversation.questions:
            started = time.perf_counter()
            ranked = rank(number, question)
            times.append(time.perf_counter() - started)
            counts = by_category[question.category]
            counts[2] += 1
            for position, k in enumerate(KS):
                if question.answers & set(ranked[:k]):
                    found[k] += 1
                    counts[position] += 1
    total = sum(len(conversation.questions) for conversation in conversations)
    return {
        "at": {k: found[k] / total for k in KS},
        "categories": {
            category: (counts[0] / counts[2], counts[1] / counts[2]) if counts[2] else (0.0, 0.0)
            for category, counts in by_category.items()
        },
        "median_ms": statistics.median(times) * 1000,
    }


def report(name: str, result: dict) -> None:
    categories = " | ".join(f"{low:.3f} / {high:.3f}" for low, high in result["categories"].values())
    print(
        f"| {name} | {result['at'][5]:.3f} | {result['at'][10]:.3f} | {categories} | {result['median_ms']:.1f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=str(locomo.DEFAULT_PATH), help="a LoCoMo JSON file")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--only", default="", help="only the rows whose name holds this text (case-insensitive)")
    parser.add_argument("--across", action="store_true", help="each question in its own chat and across all chats")
    parser.add_argument("--sweep", action="store_true", help="with --across: also 1, 2, … chats ranked in full")
    args = parser.parse_args()
    if not Path(args.path).exists():
        sys.exit(f"{args.path}: no such file (LoCoMo is not shipped with Buddy; see devtools/locomo.py)")

    conversations = locomo.load(args.path)
    if args.conversations:
        conversations = conversations[: args.conversations]
    questions = sum(len(conversation.questions) for conversation in conversations)
    messages = sum(len(conversation.messages) for conversation in conversations)
    print(f"{connection.vendor}: {len(conversations)} conversations, {messages} messages, {questions} questions")
    if not semantic.enabled() and os.environ.get("BUDDY_SEMANTIC_SEARCH") != "off":
        print("the embedding model is not installed (make semantic-model): rows with semantic search rank by words")
    chats = Chats(conversations)
    rank = chats.ranker()
    categories = " | ".join(f"{name} @5 / @10" for name in locomo.CATEGORIES.values())
    print(f"\n| ranker | recall@5 | recall@10 | {categories} | median ms |")
    print("| --- | ---: | ---: |" + " ---: |" * (len(locomo.CATEGORIES) + 1))

    if args.across:
        across_rows(conversations, chats, sweep=args.sweep)
        return
    wanted = args.only.lower()

    def run(name: str, ranker: Callable[[], Rank], *, mode: str = "on", **constants: float) -> None:
        if wanted in name.lower():
            with variant(semantic_search=mode, **constants):
                report(name, evaluate(conversations, ranker()))

    run("`LIKE` phrase, newest first", lambda: like_ranker(chats, per_word=False))
    run("`LIKE` per word, most words first", lambda: like_ranker(chats, per_word=True))
    run("FTS5 baseline (porter, OR, neighbours 0.3)", lambda: fts5_ranker(conversations))
    run("default, right after the import (no vectors)", lambda: rank)
    run("right after the import, without diversity", lambda: rank, REDUNDANCY_PENALTY=0.0)
    chats.index(share=0.5)
    run("default, half of each chat indexed", lambda: rank)
    chats.index()
    no_cues = {"SPEAKER_BOOST": 0.0, "DATE_BOOST": 0.0}
    no_neighbours = {"NEXT_WEIGHT": 0.0, "DAY_WORDS_WEIGHT": 0.0, "DAY_MEANING_WEIGHT": 0.0}
    rows = [
        (
            "words: BM25F b 0.9, context 0.8, no cues",
            "off",
            {**no_cues, **no_neighbours, "B": 0.9, "CONTEXT_WEIGHT": 0.8},
        ),
        ("words: BM25F (b 0.5, context 0.5), no cues", "off", {**no_cues, **no_neighbours}),
        ("words + speaker cue", "off", {**no_neighbours, "DATE_BOOST": 0.0}),
        ("words + date cue", "off", {**no_neighbours, "SPEAKER_BOOST": 0.0}),
        ("words + speaker + date cues", "off", no_neighbours),
        ("words + cues + best words of the day (semantic search off)", "off", {"REDUNDANCY_PENALTY": 0.0}),
        ("words + cues + day + diversity (semantic search off)", "off", {}),
        ("default without the speaker cue", "on", {"SPEAKER_BOOST": 0.0}),
        ("default without the date cue", "on", {"DATE_BOOST": 0.0}),
        ("default with the date cue at 1", "on", {"DATE_BOOST": 1.0}),
        ("default with BM25F b 0.9, context 0.8", "on", {"B": 0.9, "CONTEXT_WEIGHT": 0.8}),
        ("default without the next message's similarity", "on", {"NEXT_WEIGHT": 0.0}),
        ("default without the best words of the day", "on", {"DAY_WORDS_WEIGHT": 0.0}),
        ("default without the best meaning of the day", "on", {"DAY_MEANING_WEIGHT": 0.0}),
        ("default without the next message and the day", "on", no_neighbours),
        ("default without diversity below the first five", "on", {"REDUNDANCY_PENALTY": 0.0}),
        ("default with 100 word candidates", "on", {"RESCORED_CANDIDATES": 100}),
        ("default with 200 word candidates", "on", {"RESCORED_CANDIDATES": 200}),
        ("**default, after indexing**", "on", {}),
    ]
    for name, mode, constants in rows:
        run(name, lambda: rank, mode=mode, **constants)


if __name__ == "__main__":
    main()
