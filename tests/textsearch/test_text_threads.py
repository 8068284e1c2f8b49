"""Stemming from many threads at once gives the same terms as from one (textsearch.text): each
thread stems with its own Snowball stemmer, whose state is per word, so no term — and no cached term —
is ever another word's."""

from __future__ import annotations

import random
import string
import sys
import threading

import pytest

from textsearch import text

THREADS = 4
# Suffixes that drive the stemmer through its longer rules, where a shared stemmer's state is most
# often overwritten half way through a word.
SUFFIXES = ("", "s", "ed", "ing", "ation", "ational", "fulness", "ization", "iveness", "ably", "ements", "icity")


def _words(count: int) -> list[str]:
    rng = random.Random(28)
    words = set()
    while len(words) < count:
        root = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10)))
        words.add(root + rng.choice(SUFFIXES))
    return sorted(words)


@pytest.fixture
def fast_switching():
    """Threads handed the GIL every microsecond: interleavings that real load produces now and then
    happen on every run."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_terms_from_several_threads_match_a_single_threaded_run(fast_switching):
    words = _words(20_000)
    text.term_of.cache_clear()
    expected = [text.term_of(word) for word in words]
    text.term_of.cache_clear()

    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def stem_all(number: int) -> None:
        order = list(range(len(words)))
        random.Random(number).shuffle(order)  # each thread meets the words in another order
        stems = [""] * len(words)
        start.wait()
        for index in order:
            try:
                stems[index] = text.term_of(words[index])
            except Exception as error:  # a shared stemmer raises IndexError or AssertionError
                errors.append(error)
        results[number] = stems

    threads = [threading.Thread(target=stem_all, args=(number,)) for number in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    wrong = [
        (words[index], results[number][index], expected[index])
        for number in range(THREADS)
        for index in range(len(words))
        if results[number][index] != expected[index]
    ]
    assert not errors and not wrong, (
        f"{len(errors)} words raised ({errors[:1]}), {len(wrong)} wrong stems ({wrong[:3]})"
    )
    # What the term cache keeps afterwards is right too.
    assert [text.term_of(word) for word in words] == expected
