"""Retrieval quality, small and deterministic: a synthetic conversation (devtools/synthetic_conversations.py)
of 300 turns, loaded through the write path and searched through memory.search. The ranking is tuned on
real conversations (tests/memory/test_search_locomo.py, docs/benchmarks.md); this guards its machinery
(stems, context, candidates, vectors) on a machine without them, and fails when recall drops below what
was measured with the current ranking (minus one question), on either backend."""

from __future__ import annotations

import pytest

from conversations.models import Message
from conversations.services import message_build, messages_bulk_append
from devtools.synthetic_conversations import generate
from embeddings import encoder
from memory import semantic
from memory.search import search_history

pytestmark = pytest.mark.django_db

# Measured: recall@5 0.764 (55 of 72), recall@10 0.861 (62 of 72). One question less fails.
MIN_RECALL_AT_5 = 0.75
MIN_RECALL_AT_10 = 0.85
# With semantic search (memory.semantic): 0.889 (64 of 72) and 0.972 (70 of 72). One question less fails.
MIN_SEMANTIC_RECALL_AT_5 = 0.875
MIN_SEMANTIC_RECALL_AT_10 = 0.958


def test_recall_on_a_synthetic_conversation(session):
    found_at_5, found_at_10 = _recall(session)

    assert found_at_5 >= MIN_RECALL_AT_5
    assert found_at_10 >= MIN_RECALL_AT_10


def test_recall_with_semantic_search(session, settings):
    settings.BUDDY_SEMANTIC_SEARCH = "on"
    assert encoder.available(), encoder.INSTALL_HINT

    found_at_5, found_at_10 = _recall(session, vectors=True)

    assert found_at_5 >= MIN_SEMANTIC_RECALL_AT_5
    assert found_at_10 >= MIN_SEMANTIC_RECALL_AT_10


def _recall(session, *, vectors: bool = False) -> tuple[float, float]:
    conversation = generate(seed=7, turns=300)
    messages_bulk_append(
        messages=(message_build(session=session, role=role, content=content) for role, content in conversation.messages)
    )
    if vectors:
        semantic.vectors_update(session.pk)
    ids = list(Message.objects.filter(session=session).order_by("id").values_list("id", flat=True))
    index_of = {message_id: index for index, message_id in enumerate(ids)}

    found_at_5 = found_at_10 = 0
    for question in conversation.questions:
        hits = search_history(session=session, query=question.text, limit=10)
        ranked = [index_of[hit.message_id] for hit in hits]
        found_at_5 += bool(question.answers & set(ranked[:5]))
        found_at_10 += bool(question.answers & set(ranked))
    total = len(conversation.questions)
    return found_at_5 / total, found_at_10 / total
