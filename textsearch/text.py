"""Text processing shared by both search backends: tokens, stop words, stems, snippets.

Everything that decides what matches happens here, in Python, so that SQLite and PostgreSQL index and
query exactly the same terms; the databases only store and look up the terms we hand them.

A *term* is a casefolded, diacritic-free run of letters and digits, passed through the Snowball
English stemmer and a few derivational rules the stemmer lacks ("decided", "deciding" and "decision"
all become `decid`). Terms never contain a space, a quote, a backslash or an underscore, which the
index formats rely on.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache

import snowballstemmer

# A token is a run of letters and digits (no underscore: it separates the session prefix in the index).
_TOKEN_RE = re.compile(r"[^\W_]+")
# Longer "words" are ids, hashes or base64: they would bloat the index and never be asked for.
MAX_TOKEN_CHARS = 40
# Most distinct terms a query keeps: a 10 KB paste is answered, not turned into thousands of lookups.
MAX_QUERY_TERMS = 32
# The neighbouring message is indexed as lower-weight context, capped so that a long tool result
# before a short reply does not drown the reply's own words.
MAX_CONTEXT_TERMS = 64


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The Snowball English stop-word list (snowballstem.org/algorithms/english/stop.txt), plus a few
# contractions' leftovers ("don", "ll", "ve") that the tokeniser splits off.
STOP_WORDS = _words(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that these
    those am is are was were be been being have has had having do does did doing would should could
    ought i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd she'd we'd
    they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't hasn't haven't hadn't
    doesn't don't didn't won't wouldn't shan't shouldn't can't cannot couldn't mustn't let's that's
    who's what's here's there's when's where's why's how's a an the and but if or because as until
    while of at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why how all
    any both each few more most other some such no nor not only own same so than too very
    s t d ll m re ve y don isn aren wasn weren hasn haven hadn doesn didn won wouldn shan shouldn
    can couldn mustn let just will also us
    """
)

# Words that ask about the conversation rather than name what it was about: "what did I tell you
# about X", "do you remember when we discussed X". Dropped from queries only; messages keep them.
QUERY_STOP_WORDS = STOP_WORDS | _words(
    """
    remember recall remind reminded mention mentioned mentioning tell told say said saying
    discuss discussed discussing ask asked asking know knew please yes yeah ok okay hey hi
    again ever earlier previously anything something thing things stuff
    """
)

# Irregular forms the stemmer cannot relate to their base ("bought" is not "buy" to Snowball).
_IRREGULAR = {
    form: base
    for base, forms in {
        "become": "became",
        "begin": "began begun",
        "break": "broke broken",
        "bring": "brought",
        "build": "built",
        "buy": "bought",
        "catch": "caught",
        "choose": "chose chosen choice choices",
        "come": "came",
        "deal": "dealt",
        "draw": "drew drawn",
        "drink": "drank drunk",
        "drive": "drove driven",
        "eat": "ate eaten",
        "fall": "fell fallen",
        "feed": "fed",
        "feel": "felt",
        "fight": "fought",
        "find": "found",
        "fly": "flew flown flight flights",
        "forget": "forgot forgotten",
        "freeze": "froze frozen",
        "get": "got gotten",
        "give": "gave given",
        "go": "went gone",
        "grow": "grew grown",
        "hear": "heard",
        "hide": "hid hidden",
        "hold": "held",
        "keep": "kept",
        "know": "knew known",
        "lead": "led",
        "leave": "left",
        "lend": "lent",
        "lose": "lost loss",
        "make": "made",
        "mean": "meant",
        "meet": "met",
        "pay": "paid payment payments",
        "ride": "rode ridden",
        "ring": "rang rung",
        "rise": "rose risen",
        "run": "ran",
        "see": "saw seen",
        "seek": "sought",
        "sell": "sold sale sales",
        "send": "sent",
        "shake": "shook shaken",
        "shoot": "shot",
        "sing": "sang sung",
        "sit": "sat",
        "sleep": "slept",
        "speak": "spoke spoken speech",
        "spend": "spent",
        "stand": "stood",
        "steal": "stole stolen",
        "swim": "swam swum",
        "take": "took taken",
        "teach": "taught",
        "tear": "tore torn",
        "think": "thought thoughts",
        "throw": "threw thrown",
        "understand": "understood",
        "wake": "woke woken",
        "wear": "wore worn",
        "win": "won",
        "write": "wrote written",
        "child": "children",
        "person": "people",
        "man": "men",
        "woman": "women",
        "mouse": "mice",
        "tooth": "teeth",
        "foot": "feet",
    }.items()
    for form in forms.split()
}

# Derivational endings that Snowball leaves apart, as (stem ending, replacement): noun forms are
# brought to their verb's stem ("decis" → "decid", "inclus" → "includ", "descript" → "describ").
# Applied only to stems of at least five letters, where they are word endings, not whole words.
_DERIVATIONS = (
    ("ation", "at"),
    ("umpt", "um"),
    ("ript", "rib"),
    ("miss", "mit"),
    ("olut", "olv"),
    ("ept", "eiv"),
    ("uct", "uc"),
    ("ans", "and"),
    ("is", "id"),
    ("us", "ud"),
    ("os", "od"),
    ("i", ""),  # "allergi" (allergy) → "allerg" (allergic), "strategi" → "strateg"
)

# A Snowball stemmer keeps the word it is working on in its own attributes, so two threads sharing one
# overwrite each other's word half way: wrong stems, or IndexError. Each thread gets its own.
_stemmers = threading.local()


def _stem(word: str) -> str:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word)


def fold(text: str) -> str:
    """Casefolded, with diacritics removed ("Café" → "cafe"); ASCII text takes the fast path."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


@lru_cache(maxsize=200_000)
def term_of(word: str) -> str:
    """The index term of one folded token (not a stop word). A pure function of the word (each thread
    stems with its own stemmer), so the cache shared by all threads only ever holds right terms."""
    word = _IRREGULAR.get(word, word)
    stem = _stem(word)
    if len(stem) >= 5:
        for ending, replacement in _DERIVATIONS:
            if stem.endswith(ending):
                return stem[: -len(ending)] + replacement
    return stem


def tokens_with_spans(text: str) -> list[tuple[str, int, int]]:
    """(folded token, start, end) for every token of `text`, offsets into `text` itself."""
    if text.isascii():  # lowering ASCII keeps every offset, and which characters are word characters
        return [(match.group(), *match.span()) for match in _TOKEN_RE.finditer(text.lower())]
    return [(fold(match.group()), *match.span()) for match in _TOKEN_RE.finditer(text)]


def _terms(text: str, stop_words: frozenset[str]) -> Iterator[str]:
    for token in _TOKEN_RE.findall(fold(text)):
        if len(token) <= MAX_TOKEN_CHARS and token not in stop_words:
            yield term_of(token)


def index_terms(text: str) -> list[str]:
    """The terms of a message, in order, repeats kept (term frequency counts in ranking)."""
    return list(_terms(text, STOP_WORDS))


def query_terms(text: str) -> list[str]:
    """The distinct terms of a natural-language query, in order of appearance, at most MAX_QUERY_TERMS.
    Empty when nothing is left after stop words: the caller answers "no results"."""
    seen: dict[str, None] = {}
    for term in _terms(text, QUERY_STOP_WORDS):
        seen.setdefault(term, None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def context_terms(terms: Iterable[str]) -> list[str]:
    """The neighbour's terms as stored for context: distinct, in order, capped."""
    seen: dict[str, None] = {}
    for term in terms:
        seen.setdefault(term, None)
        if len(seen) >= MAX_CONTEXT_TERMS:
            break
    return list(seen)


def index_prefix(session_id: int) -> str:
    """Index terms are namespaced by session (`12_price`), so a posting list is one session's."""
    return f"{session_id}_"


def search_context(*, previous: str, turn_start: str | None) -> str:
    """The stored search context of a message, from the stored terms of its neighbours: the prompt that
    started its turn (for a message inside a turn, e.g. the reply after tool round-trips; it names what
    the turn is about) and the message just before it. Distinct terms, the turn's prompt first, capped."""
    return join_terms(context_terms(split_terms(turn_start or "") + split_terms(previous)))


def join_terms(terms: Iterable[str]) -> str:
    return " ".join(terms)


def split_terms(stored: str) -> list[str]:
    return stored.split()


# --- snippets -------------------------------------------------------------------------------------
SNIPPET_TOKENS = 24
SNIPPET_MAX_CHARS = 240
_SPACE_RE = re.compile(r"\s+")


def snippet(text: str, terms: Iterable[str], *, window: int = SNIPPET_TOKENS) -> str:
    """Plain text around the best cluster of matches, each match between `[` and `]`.

    The window of `window` tokens holding the most distinct query terms is chosen (earliest on ties).
    The text is quoted as it is, except that a `[`, `]` or `\\` of its own is preceded by a backslash:
    every bracket without one marks a match.
    """
    wanted = set(terms)
    # Stemming only rewrites endings (and a few irregular forms), so a token can only match a term it
    # shares its first letters with: the cheap test spares stemming every word of a long message.
    starts = {term[:2] for term in wanted}
    tokens = tokens_with_spans(text)
    hits = [
        index
        for index, (token, _, _) in enumerate(tokens)
        if (token[:2] in starts or token in _IRREGULAR)
        and len(token) <= MAX_TOKEN_CHARS
        and token not in STOP_WORDS
        and term_of(token) in wanted
    ]
    best_start = 0
    if hits:
        best_count = -1
        for first in hits:
            inside = {term_of(tokens[index][0]) for index in hits if first <= index < first + window}
            if len(inside) > best_count:
                best_count, best_start = len(inside), first
        # A few words of lead-in read better than starting on the match itself, and a window that
        # would run past the end slides back to show as much of the text as it can.
        best_start = max(0, min(best_start - 3, len(tokens) - window))
    if not tokens:
        return _clean(text[:SNIPPET_MAX_CHARS])
    last = min(len(tokens), best_start + window) - 1
    start_char = 0 if best_start == 0 else tokens[best_start][1]
    end_char = len(text) if last == len(tokens) - 1 else tokens[last][2]
    hit_set = {index for index in hits if best_start <= index <= last}
    parts: list[str] = []
    cursor = start_char
    for index in range(best_start, last + 1):
        _, start, end = tokens[index]
        if index in hit_set:
            parts.append(_clean(text[cursor:start]))
            parts.append("[" + _clean(text[start:end]) + "]")
            cursor = end
    parts.append(_clean(text[cursor:end_char]))
    body = "".join(parts).strip()
    if len(body) > SNIPPET_MAX_CHARS:
        body = body[:SNIPPET_MAX_CHARS]
        # Never end inside an escape or inside a match: find the marks, skipping escaped characters.
        open_mark, index = -1, 0
        while index < len(body):
            if body[index] == "\\":
                if index + 1 == len(body):
                    body = body[:index]  # a backslash whose character was cut off
                    break
                index += 2
                continue
            if body[index] in "[]":
                open_mark = index if body[index] == "[" else -1
            index += 1
        if open_mark >= 0:
            body = body[:open_mark]
        body = body.rstrip() + "…"
    prefix = "…" if start_char > 0 else ""
    suffix = "…" if end_char < len(text) and not body.endswith("…") else ""
    return prefix + body + suffix


def _clean(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return _SPACE_RE.sub(" ", escaped)
