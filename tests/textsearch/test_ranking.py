"""The ranking arithmetic of history search (textsearch.ranking), without a database: BM25F counted
in the stored strings, diversity's shortcut against the plain definition, IDF weights."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from textsearch import ranking


def test_a_rarer_term_weighs_more_and_every_term_weighs_something():
    assert ranking.term_weight(1, 1000) > ranking.term_weight(10, 1000) > ranking.term_weight(999, 1000) > 0
    assert ranking.term_weight(1000, 1000) > 0  # a term in every message still counts a little
    assert ranking.term_weight(7, 500) == pytest.approx(ranking.idf(7, 500) ** ranking.IDF_POWER)
    assert ranking.idf(0, 0) == pytest.approx(math.log(2))


def _bm25f_reference(*, terms, body: list[str], context: list[str], average_body, average_context) -> float:
    """BM25F as written in the literature, over lists of terms: what ranking.bm25f computes from the
    stored strings."""
    body_norm = 1 - ranking.B + ranking.B * len(body) / average_body
    context_norm = 1 - ranking.B + ranking.B * len(context) / average_context
    score = 0.0
    for term, weight in terms.items():
        frequency = body.count(term) / body_norm + (ranking.CONTEXT_WEIGHT / context_norm if term in context else 0)
        if frequency:
            score += weight * frequency * (ranking.K1 + 1) / (frequency + ranking.K1)
    return score


_TERMS = st.sampled_from(["a", "ab", "b", "ba", "price", "pric", "rice", "x1"])


@given(
    body=st.lists(_TERMS, max_size=12),
    context=st.lists(_TERMS, max_size=6, unique=True),
    query=st.dictionaries(_TERMS, st.floats(0.1, 10), min_size=1, max_size=4),
)
def test_bm25f_counts_whole_terms_in_the_stored_strings(body, context, query):
    """Scored from the stored strings: repeated neighbours ("a a a") each count, and a term never
    matches inside a longer one ("rice" in "price")."""
    averages = {"average_body": 5.0, "average_context": 3.0}
    expected = _bm25f_reference(terms=query, body=body, context=context, **averages)
    stored = ranking.bm25f(terms=query, body=" ".join(body), context=" ".join(context), **averages)
    assert stored == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # A search scores its candidates together: each the same as alone, in order.
    fields = [(" ".join(body), " ".join(context)), ("", ""), (" ".join(context), " ".join(body))]
    together = ranking.bm25f_many(terms=query, fields=fields, **averages)
    alone = [_bm25f_reference(terms=query, body=b.split(), context=c.split(), **averages) for b, c in fields]
    assert together == pytest.approx(alone, rel=1e-12, abs=1e-12)


def _diversified_reference(scored, bodies, *, count):
    """Diversity as the ranking defines it, computed the plain way: every pick compares every message
    left in the pool with every result picked so far."""
    head = scored[: ranking.DIVERSE_AFTER]
    pool = scored[ranking.DIVERSE_AFTER : ranking.DIVERSE_AFTER + ranking.DIVERSE_POOL]
    if count <= ranking.DIVERSE_AFTER or not head or not pool:
        return scored[:count]
    terms = {message_id: set(bodies[message_id].split()) for _, message_id in scored}

    def penalty(message_id, picked):
        overlaps = [
            len(terms[message_id] & terms[other]) / len(terms[message_id] | terms[other])
            for _, other in picked
            if terms[message_id] | terms[other]
        ]
        return ranking.REDUNDANCY_PENALTY * max(overlaps, default=0.0)

    picked = list(head)
    while pool and len(picked) < count:
        values = [score - penalty(message_id, picked) for score, message_id in pool]
        best = values.index(max(values))  # the first of equals
        picked.append((values[best], pool.pop(best)[1]))
    ordered = []
    for score, message_id in (picked + pool + scored[ranking.DIVERSE_AFTER + ranking.DIVERSE_POOL :])[:count]:
        ordered.append((min(score, ordered[-1][0]) if ordered else score, message_id))
    return ordered


@hypothesis_settings(max_examples=300)
@given(
    messages=st.lists(
        st.tuples(st.integers(-40, 40).map(lambda value: value / 4), st.lists(_TERMS, max_size=6)), max_size=60
    ),
    count=st.integers(1, 30),
)
def test_diversity_picks_what_comparing_every_pair_picks(messages, count):
    """diversified compares a message only with the results picked since it last was, and stops a
    pick at the first score no better than the best penalised one: the same picks, scores and order as
    comparing everything (scores on a coarse grid, so that equal ones occur)."""
    scored = sorted(((score, message_id) for message_id, (score, _) in enumerate(messages)), reverse=True)
    bodies = {message_id: " ".join(terms) for message_id, (_, terms) in enumerate(messages)}

    assert ranking.diversified(list(scored), bodies, count=count) == _diversified_reference(scored, bodies, count=count)
