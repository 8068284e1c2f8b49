"""Ranking arithmetic of history search, on terms as stored (textsearch.text): BM25F over a message's
own terms and its context's, the IDF weights of query terms, and diversity below the first results.
Plain Python: the Django side (memory.search) reads the candidates and statistics and calls these.

The parameters were chosen on real conversations (bench/recall.py; the LoCoMo figures in
docs/benchmarks.md).
"""

from __future__ import annotations

import math

# BM25 parameters: k1 as usual; b, the context weight and the IDF power.
K1 = 1.2
B = 0.5
CONTEXT_WEIGHT = 0.5
IDF_POWER = 2
# Diversity below the first results (`diversified`): the results after the best DIVERSE_AFTER are
# picked from the next DIVERSE_POOL by score minus REDUNDANCY_PENALTY × their largest term overlap
# (Jaccard) with a result already picked.
DIVERSE_AFTER = 5
DIVERSE_POOL = 40
REDUNDANCY_PENALTY = 16.0


def idf(df: int, messages: int) -> float:
    """BM25's IDF, kept positive (Lucene's form): a term in every message still counts a little."""
    return math.log(1 + (messages - df + 0.5) / (df + 0.5))


def term_weight(df: int, messages: int) -> float:
    """A query term's weight in the ranking: its IDF squared. BM25 weighs a term by IDF once, on the
    message side; weighing the query side by IDF as well (tf-idf's query vector) widens the gap
    between rare and common words: measured on bench/recall.py (seeds 1–3, tuning), recall@5 / @10
    0.718 / 0.773 with IDF¹, 0.741 / 0.801 with IDF², 0.750 / 0.806 with IDF³."""
    return idf(df, messages) ** IDF_POWER


def bm25f(
    *,
    terms: dict[str, float],
    body: str,
    context: str,
    average_body: float,
    average_context: float,
) -> float:
    """BM25F of one message (Robertson & Zaragoza): each field's term frequency is normalised by that
    field's length against its own average, the fields are summed with their weights, and the sum is
    saturated once, so a long neighbour does not make the message itself count as long. `body` and
    `context` are terms as stored (joined by single spaces; the context's distinct,
    textsearch.text.context_terms)."""
    return bm25f_many(
        terms=terms, fields=[(body, context)], average_body=average_body, average_context=average_context
    )[0]


def bm25f_many(
    *, terms: dict[str, float], fields: list[tuple[str, str]], average_body: float, average_context: float
) -> list[float]:
    """`bm25f` of each (body, context) of `fields`, in order: a search scores a few hundred."""
    # Counted in the stored strings, not in lists split from them: str.count runs in C. Spaces are
    # doubled in the body because str.count finds matches that do not overlap, and " a " twice in
    # " a a " shares a space.
    needles = [(f" {term} ", weight) for term, weight in terms.items()]
    saturation, context_weight = K1 + 1, CONTEXT_WEIGHT
    body_scale, context_scale = B / average_body, B / average_context
    scores = []
    for body, context in fields:
        # 1 - B + B × length / average, the length counted as spaces + 1 (0 for an empty field).
        body_norm = 1 - B + body_scale * (body.count(" ") + 1 if body else 0)
        context_norm = 1 - B + context_scale * (context.count(" ") + 1 if context else 0)
        spaced_body = " " + body.replace(" ", "  ") + " "
        spaced_context = f" {context} "
        score = 0.0
        for needle, weight in needles:
            frequency = spaced_body.count(needle) / body_norm
            if needle in spaced_context:
                frequency += context_weight / context_norm
            if frequency:
                score += weight * frequency * saturation / (frequency + K1)
        scores.append(score)
    return scores


def diversified(scored: list[tuple[float, int]], bodies: dict[int, str], *, count: int) -> list[tuple[float, int]]:
    """The first `count` of `scored` (best first), those after the best DIVERSE_AFTER picked for what
    they add: each next one is, among the following DIVERSE_POOL, the one with the highest score minus
    REDUNDANCY_PENALTY × its largest Jaccard overlap of terms with a result already picked (`bodies`:
    id → stored terms; the first of equals in `scored`'s order). A near-copy of a result above (the
    same words said twice, a reply that repeats them) gives its slot to a message that may hold other
    evidence. A picked result's score is its own minus that penalty.

    A penalty only grows as results are picked, so each pick walks the pool best first and stops at
    the first score no better than the best penalised one found: most of the pool is never compared,
    and a message is compared only with the results picked since it last was."""
    head, pool = scored[:DIVERSE_AFTER], scored[DIVERSE_AFTER : DIVERSE_AFTER + DIVERSE_POOL]
    if count <= DIVERSE_AFTER or not head or not pool or REDUNDANCY_PENALTY <= 0:
        return scored[:count]
    terms: dict[int, frozenset[str]] = {}

    def terms_of(message_id: int) -> frozenset[str]:
        found = terms.get(message_id)
        if found is None:
            found = terms[message_id] = frozenset(bodies.get(message_id, "").split())
        return found

    picked_terms = [terms_of(message_id) for _, message_id in head]
    # Per message of the pool: its largest overlap so far, and with how many of picked_terms.
    overlaps = {message_id: (0.0, 0) for _, message_id in pool}
    picked_rows = list(head)
    while pool and len(picked_rows) < count:
        best_index, best_value = 0, -math.inf
        for index, (score, message_id) in enumerate(pool):
            if score <= best_value:
                break
            largest, compared = overlaps[message_id]
            if compared < len(picked_terms):
                own = terms_of(message_id)
                for other in picked_terms[compared:]:
                    shared = len(own & other)
                    if shared:  # Jaccard: shared terms over all terms of the two
                        largest = max(largest, shared / (len(own) + len(other) - shared))
                overlaps[message_id] = (largest, len(picked_terms))
            if score - REDUNDANCY_PENALTY * largest > best_value:
                best_index, best_value = index, score - REDUNDANCY_PENALTY * largest
        _, message_id = pool.pop(best_index)
        picked_rows.append((best_value, message_id))
        picked_terms.append(terms_of(message_id))
    # Each result's score is the one that placed it, never above the one before (best first).
    ordered = []
    for score, message_id in (picked_rows + pool + scored[DIVERSE_AFTER + DIVERSE_POOL :])[:count]:
        ordered.append((min(score, ordered[-1][0]) if ordered else score, message_id))
    return ordered
