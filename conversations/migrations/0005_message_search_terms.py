"""The index terms of every message and of its neighbours (its search context), computed on write from
now on. The text processing is written out here as it was when this migration was frozen (memory's
search terms: casefolded, diacritics removed, stop words dropped, Snowball English stems and a few
derivational rules), so that the terms it fills in match the ones written beside them."""

import re
import unicodedata

import snowballstemmer
from django.db import migrations, models

# A token is a run of letters and digits (no underscore: it separates the session prefix in the index).
_TOKEN_RE = re.compile(r"[^\W_]+")
# Longer "words" are ids, hashes or base64: they would bloat the index and never be asked for.
MAX_TOKEN_CHARS = 40
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

def fold(text: str) -> str:
    """Casefolded, with diacritics removed ("Café" → "cafe"); ASCII text takes the fast path."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def _term_of(stemmer, word: str) -> str:
    """The index term of one folded token (not a stop word)."""
    word = _IRREGULAR.get(word, word)
    stem = stemmer.stemWord(word)
    if len(stem) >= 5:
        for ending, replacement in _DERIVATIONS:
            if stem.endswith(ending):
                return stem[: -len(ending)] + replacement
    return stem


def _index_terms(stemmer, text: str) -> str:
    """The stored terms of a message: its tokens' terms, in order, repeats kept, stop words dropped."""
    terms = []
    for token in _TOKEN_RE.findall(fold(text)):
        if len(token) <= MAX_TOKEN_CHARS and token not in STOP_WORDS:
            terms.append(_term_of(stemmer, token))
    return " ".join(terms)


def _search_context(*, previous: str, turn_start: str | None) -> str:
    """The neighbours' distinct terms, the turn's prompt first, at most MAX_CONTEXT_TERMS."""
    seen: dict[str, None] = {}
    for term in (turn_start or "").split() + previous.split():
        seen.setdefault(term, None)
        if len(seen) >= MAX_CONTEXT_TERMS:
            break
    return " ".join(seen)


def fill_search_terms(apps, schema_editor):
    """Compute the index terms of the messages archived before search existed, in archive order, each
    with its search context (conversations.services.message_append does the same on every write)."""
    stemmer = snowballstemmer.stemmer("english")
    Message = apps.get_model("conversations", "Message")
    previous: dict[int, str] = {}  # session id → terms of its latest message
    turn_start: dict[int, str] = {}  # session id → terms of its latest turn start
    batch = []
    messages = Message.objects.order_by("id").only("id", "session_id", "is_turn_start", "search_text")
    for message in messages.iterator(chunk_size=2000):
        session_id = message.session_id
        message.search_terms = _index_terms(stemmer, message.search_text)
        if session_id in previous:
            inside_turn = not message.is_turn_start and previous[session_id] is not turn_start.get(session_id)
            message.search_context = _search_context(
                previous=previous[session_id], turn_start=turn_start.get(session_id) if inside_turn else None
            )
        previous[session_id] = message.search_terms
        if message.is_turn_start:
            turn_start[session_id] = message.search_terms
        batch.append(message)
        if len(batch) >= 2000:
            Message.objects.bulk_update(batch, ["search_terms", "search_context"])
            batch = []
    if batch:
        Message.objects.bulk_update(batch, ["search_terms", "search_context"])


class Migration(migrations.Migration):
    dependencies = [("conversations", "0004_summary_lease")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_terms",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.AddField(
            model_name="message",
            name="search_context",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill_search_terms, migrations.RunPython.noop),
    ]
