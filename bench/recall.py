"""Retrieval quality of history search: recall@5 / recall@10 on synthetic long conversations.

    .venv/bin/python bench/recall.py                       # SQLite (var/bench/recall.sqlite3, rebuilt)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_recall .venv/bin/python bench/recall.py

A question counts as answered at k when one of the first k results is a message that contains the
answer (bench/synthetic_conversations.py). Reported side by side:

- like-phrase: the original design, `search_text LIKE '%<query>%'`, newest first;
- like-words: one `LIKE` per query word (3+ letters), most words matched first, then newest;
- bm25-message: BM25 over each message's own terms (our tokens, stop words, stems), no context;
- bm25-neighbours: BM25 over each message merged with its neighbours' terms (previous and next) in
  one field;
- bm25-neighbours-idf2: the same, with our query-term weights (IDF², memory.search.term_weight),
  to show how much of our gain is the weighting alone;
- ours (model): BM25F, the message's terms plus its search context as a separate field at weight
  CONTEXT_WEIGHT, terms weighted by IDF² (computed in memory, the whole conversation ranked: no
  candidate bounds);
- ours (database): memory.search.search_history on the database, with its candidate bounds, words
  only (BUDDY_SEMANTIC_SEARCH=off);
- ours + semantic (database): the same with semantic search on (memory.semantic: sentence vectors of
  each message and the one before it, the nearest joined to the candidates and all ranked by both);
  the vectors are written once into the bench database (~2 min per 4,000 messages on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
if not os.environ.get("DATABASE_URL"):
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench' / 'recall.sqlite3'}"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from bench.synthetic_conversations import Conversation, generate  # noqa: E402
from conversations.content import is_turn_start, normalize_content, readable_text  # noqa: E402
from memory import search, semantic  # noqa: E402
from memory.search.text import index_terms, query_terms, search_context  # noqa: E402

# Seeds 1-3 were used to choose CONTEXT_WEIGHT, B and IDF_POWER; these are held out.
SEEDS = (4, 5, 6)
TURNS = 2000
KS = (5, 10)


# --- in-memory rankers (same tokens and statistics as the database path) -------------------------
class Corpus:
    def __init__(self, conversation: Conversation) -> None:
        self.texts = [readable_text(normalize_content(content)) for _, content in conversation.messages]
        self.terms = [index_terms(text) for text in self.texts]
        self.context: list[list[str]] = []
        previous: int | None = None
        turn_start: int | None = None
        for index, (role, content) in enumerate(conversation.messages):
            starts = is_turn_start(role, normalize_content(content))
            if previous is None:
                self.context.append([])
            else:
                inside = not starts and turn_start is not None and turn_start != previous
                self.context.append(
                    search_context(
                        previous=" ".join(self.terms[previous]),
                        turn_start=" ".join(self.terms[turn_start]) if inside else None,
                    ).split()
                )
            previous = index
            if starts:
                turn_start = index
        self.df = Counter(term for terms in self.terms for term in set(terms))
        self.n = len(self.terms)

    def idf(self, term: str) -> float:
        return search.idf(self.df[term], self.n)

    def weight(self, term: str) -> float:
        return search.term_weight(self.df[term], self.n)

    def bm25(self, query: str, fields: list[list[str]], k: int, *, weight=None) -> list[int]:
        weight = weight or self.idf
        terms = {term: weight(term) for term in query_terms(query) if self.df[term]}
        average = sum(len(f) for f in fields) / self.n
        scores = []
        for index, body in enumerate(fields):
            score = search.bm25f(terms=terms, body=" ".join(body), context="", average_body=average, average_context=1)
            if score:
                scores.append((score, index))
        return [index for _, index in sorted(scores, reverse=True)[:k]]

    def bm25f(self, query: str, k: int) -> list[int]:
        terms = {term: self.weight(term) for term in query_terms(query) if self.df[term]}
        average_body = sum(len(t) for t in self.terms) / self.n
        average_context = sum(len(c) for c in self.context) / self.n
        scores = []
        for index in range(self.n):
            score = search.bm25f(
                terms=terms,
                body=" ".join(self.terms[index]),
                context=" ".join(self.context[index]),
                average_body=average_body,
                average_context=average_context,
            )
            if score:
                scores.append((score, index))
        return [index for _, index in sorted(scores, reverse=True)[:k]]

    def like_phrase(self, query: str, k: int) -> list[int]:
        needle = query.lower()
        return [index for index in range(self.n - 1, -1, -1) if needle in self.texts[index].lower()][:k]

    def like_words(self, query: str, k: int) -> list[int]:
        words = {word for word in re.findall(r"\w+", query.lower()) if len(word) >= 3}
        lowered = [text.lower() for text in self.texts]
        scored = [(sum(word in lowered[i] for word in words), i) for i in range(self.n)]
        return [index for count, index in sorted(scored, reverse=True) if count][:k]


def recall(conversations: list[Conversation], rank) -> dict[int, float]:
    """rank(conversation_index, question_text, k) -> message indexes, best first."""
    hits = dict.fromkeys(KS, 0)
    total = 0
    for number, conversation in enumerate(conversations):
        for question in conversation.questions:
            total += 1
            found = rank(number, question.text, max(KS))
            for k in KS:
                if question.answers & set(found[:k]):
                    hits[k] += 1
    return {k: hits[k] / total for k in KS}


def database_ranker(conversations: list[Conversation]):
    """Load the conversations through the write path (messages_bulk_append), write their vectors,
    and rank with search_history; returns ranker(mode) → rank(conversation_index, query, k), mode
    being BUDDY_SEMANTIC_SEARCH."""
    from django.contrib.auth import get_user_model

    from conversations.models import Message
    from conversations.services import message_build, messages_bulk_append, session_get_or_create

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="recall-bench")
    sessions = []
    id_maps = []
    for number, conversation in enumerate(conversations):
        session = session_get_or_create(user=user, agent_slug="buddy", chat_id=f"recall-{number}")
        if not Message.objects.filter(session=session).exists():
            messages_bulk_append(
                messages=(
                    message_build(session=session, role=role, content=content)
                    for role, content in conversation.messages
                )
            )
        if semantic.enabled():
            semantic.vectors_fill(session.pk)
        ids = list(Message.objects.filter(session=session).order_by("id").values_list("id", flat=True))
        assert len(ids) == len(conversation.messages), "stale bench database: delete it and run again"
        sessions.append(session)
        id_maps.append({message_id: index for index, message_id in enumerate(ids)})

    def ranker(mode: str):
        def rank(number: int, query: str, k: int) -> list[int]:
            with override_settings(BUDDY_SEMANTIC_SEARCH=mode):
                hits = search.search_history(session=sessions[number], query=query, limit=k)
            return [id_maps[number][hit.message_id] for hit in hits]

        return rank

    return ranker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    parser.add_argument("--no-db", action="store_true", help="only the in-memory rankers")
    args = parser.parse_args()

    conversations = [generate(seed=seed, turns=args.turns) for seed in args.seeds]
    corpora = [Corpus(conversation) for conversation in conversations]
    questions = sum(len(c.questions) for c in conversations)
    messages = sum(len(c.messages) for c in conversations)
    print(f"{len(conversations)} conversations, {messages} messages, {questions} questions")

    merged = [
        [
            (corpus.terms[i - 1] if i else []) + corpus.terms[i] + (corpus.terms[i + 1] if i + 1 < corpus.n else [])
            for i in range(corpus.n)
        ]
        for corpus in corpora
    ]
    rankers = {
        "like-phrase": lambda n, q, k: corpora[n].like_phrase(q, k),
        "like-words": lambda n, q, k: corpora[n].like_words(q, k),
        "bm25-message": lambda n, q, k: corpora[n].bm25(q, corpora[n].terms, k),
        "bm25-neighbours": lambda n, q, k: corpora[n].bm25(q, merged[n], k),
        "bm25-neighbours-idf2": lambda n, q, k: corpora[n].bm25(q, merged[n], k, weight=corpora[n].weight),
        "ours (model)": lambda n, q, k: corpora[n].bm25f(q, k),
    }
    if not args.no_db:
        ranker = database_ranker(conversations)
        rankers[f"ours ({connection.vendor})"] = ranker("off")
        if semantic.enabled():
            rankers[f"ours + semantic ({connection.vendor})"] = ranker("on")
        else:
            print("semantic search is off (no model: make semantic-model): its row is missing")
    print(f"{'ranker':<22} {'recall@5':>9} {'recall@10':>10} {'time':>8}")
    for name, rank in rankers.items():
        started = time.perf_counter()
        result = recall(conversations, rank)
        elapsed = time.perf_counter() - started
        print(f"{name:<22} {result[5]:>9.3f} {result[10]:>10.3f} {elapsed:>7.1f}s")


if __name__ == "__main__":
    main()
