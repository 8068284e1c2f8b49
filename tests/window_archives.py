"""Hypothesis strategies for archives as the turn engine (and imports) write them, and for window
settings. Shared by the window tests and any test that wants realistic, messy conversations.

An archive is a list of `(role, content)`: text turns, tool rounds with parallel calls, confirmations
(a `canvas_show_confirmation` call, later answered by a `[confirmation ID: confirmed]` prompt), huge
blocks of every kind, turns cut off after any message (a crash or a failed model call), and imported
histories that begin with an assistant message or with tool results whose calls were never archived.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from conversations.window.plan import Limits

Content = list[dict[str, Any]]

# Characters JSON escapes differently (quotes, backslashes, newlines, non-ASCII, astral), and spaces.
ALPHABET = 'ab yz\n\t"\\é…🙂'


@st.composite
def limits(draw: st.DrawFn, *, max_budget: int = 4000, max_rows: int = 24) -> Limits:
    budget = draw(st.integers(256, max_budget))
    block_cap = draw(st.one_of(st.just(max(budget // 4, 64)), st.integers(64, budget)))
    return Limits(
        budget=budget,
        rows=draw(st.integers(2, max_rows)),
        low_water=draw(st.sampled_from([0.3, 0.5, 0.7, 0.9, 1.0])),
        block_cap=block_cap,
    )


@st.composite
def texts(draw: st.DrawFn, cap_chars: int) -> str:
    """Mostly short, sometimes over the block cap (`cap_chars` characters of JSON)."""
    seed = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=10))
    size = draw(st.sampled_from(["tiny"] * 5 + ["small"] * 3 + ["huge"]))
    if size == "tiny":
        length = draw(st.integers(1, 40))
    elif size == "small":
        length = draw(st.integers(40, max(cap_chars // 3, 41)))
    else:
        length = draw(st.integers(cap_chars + 1, cap_chars * 2))
    return (seed * (length // len(seed) + 1))[:length]


class _Ids:
    def __init__(self) -> None:
        self.count = 0

    def next(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count:04d}"


@st.composite
def _prompt(draw: st.DrawFn, cap_chars: int, confirmations: list[str]) -> Content:
    if confirmations and draw(st.integers(0, 2)) == 0:
        answer = draw(st.sampled_from(["confirmed", "declined"]))
        return [{"type": "text", "text": f"[confirmation {confirmations.pop(0)}: {answer}]"}]
    content: Content = [{"type": "text", "text": draw(texts(cap_chars))}]
    if draw(st.integers(0, 9)) == 0:  # an attached image, sometimes larger than the cap
        data = "A" * draw(st.sampled_from([40, cap_chars + 8]))
        content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
    return content


@st.composite
def _result_content(draw: st.DrawFn, cap_chars: int) -> Any:
    text = draw(texts(cap_chars))
    if draw(st.integers(0, 4)) == 0:
        return [{"type": "text", "text": text}, {"type": "text", "text": "second part"}]
    return text


@st.composite
def _turn(draw: st.DrawFn, ids: _Ids, cap_chars: int, confirmations: list[str]) -> list[tuple[str, Content]]:
    messages: list[tuple[str, Content]] = [("user", draw(_prompt(cap_chars, confirmations)))]
    for _round in range(draw(st.integers(0, 3))):
        calls: Content = []
        if draw(st.booleans()):
            calls.append({"type": "text", "text": draw(texts(cap_chars))})
        for _call in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from(["canvas_add_card", "search_history", "canvas_show_confirmation"]))
            element_id = ids.next("el")
            if name == "canvas_show_confirmation":
                tool_input = {"id": element_id, "title": "Sure?", "message": draw(texts(cap_chars))}
                confirmations.append(element_id)
            else:
                tool_input = {"id": element_id, "title": "Card", "body": draw(texts(cap_chars))}
            calls.append({"type": "tool_use", "id": ids.next("toolu_"), "name": name, "input": tool_input})
        messages.append(("assistant", calls))
        results: Content = []
        for call in calls:
            if call["type"] != "tool_use" or draw(st.integers(0, 19)) == 0:  # rarely, a result never stored
                continue
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call["id"],
                "content": draw(_result_content(cap_chars)),
            }
            if draw(st.integers(0, 5)) == 0:
                result["is_error"] = True
            results.append(result)
        if draw(st.integers(0, 29)) == 0:  # rarely, a result for a call that is not there
            results.append({"type": "tool_result", "tool_use_id": ids.next("toolu_ghost"), "content": "?"})
        if results:
            messages.append(("user", results))
    messages.append(("assistant", [{"type": "text", "text": draw(texts(cap_chars))}]))
    if draw(st.integers(0, 3)) == 0:  # cut off after any message: a crash or a failed model call
        return messages[: draw(st.integers(1, len(messages)))]
    return messages


@st.composite
def archives(draw: st.DrawFn, cap_chars: int, max_turns: int = 8) -> list[tuple[str, Content]]:
    """A whole archive; `cap_chars` (4 × the block cap) sizes the huge blocks."""
    ids = _Ids()
    confirmations: list[str] = []
    archive: list[tuple[str, Content]] = []
    opening = draw(st.sampled_from(["none"] * 4 + ["assistant", "results", "call"]))
    if opening == "assistant":  # an import that begins mid-conversation
        archive.append(("assistant", [{"type": "text", "text": draw(texts(cap_chars))}]))
    elif opening == "results":
        archive.append(("user", [{"type": "tool_result", "tool_use_id": "toolu_lost", "content": "old result"}]))
        archive.append(("assistant", [{"type": "text", "text": "Done."}]))
    elif opening == "call":
        archive.append(("assistant", [{"type": "tool_use", "id": "toolu_early", "name": "x", "input": {}}]))
    for _turn_number in range(draw(st.integers(1, max_turns))):
        archive.extend(draw(_turn(ids, cap_chars, confirmations)))
    return archive
