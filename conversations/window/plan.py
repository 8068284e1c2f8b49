"""The window's pure core (docs/window.md): no database, no settings.

It works on lightweight `Row`s — the facts computed on write (`tokens`, `is_turn_start`,
`largest_block_tokens`) plus the content, decoded only when a row is actually looked at — and decides
where the window starts and what it sends.

How a window is rendered. Every archived row becomes exactly one sent message, in order, possibly
preceded by one synthetic message, and the window may end with one synthetic message:

- a block over the cap is shortened (`blocks.shorten_block`), the same way on every call;
- blank text blocks are dropped (the API refuses them); an emptied message gets a short placeholder;
- a user message answers the tool_use blocks of the row before it: its matching tool_results go first,
  an `is_error` "interrupted" result is added for every tool_use left unanswered, and a tool_result
  that answers nothing there becomes a text note (`blocks.orphan_result_note`);
- a user row right after a user row (a prompt whose model call failed) gets a synthetic assistant
  message before it; an assistant row right after an assistant row (imports) gets a synthetic user
  message before it, holding the interrupted results of the first one's tool calls;
- after a newest assistant row with tool calls comes a synthetic user message of interrupted results.

So a row's rendering depends only on itself and the row before it — except for the window's first row,
which has no row before it (its tool_results become notes). The window's cost from a start `s` is
therefore `first(s) + Σ after(j) for j > s + trailing`, and one walk back from the newest row gives the
cost of every possible start. `tokens` of a rendered message is the stored estimate when the message is
sent exactly as archived, and is only re-counted for the few messages that were changed.

Where the window starts (precedence, first that applies):
1. `stored`: the stored start (or, when it is 0 or not a user row, the first turn start after it) while
   the window from there fits the budget and the row cap.
2. `step`: otherwise the first turn start after it at which the window holds at most the low-water share
   of both; when no turn start gets that low, the newest turn start whose window fits.
3. `inside_turn`: when even the newest turn alone does not fit (or there is no turn start), the window
   starts inside that turn at a user message of tool results (they become notes): the first one at the
   low-water mark, else the newest one that fits. The budget is hard; rule 2 yields to it.
4. `squeezed`: when no such message fits either (a single message holding many capped blocks), the
   window starts at the newest user message with a halved block cap (repeatedly, down to
   `MIN_BLOCK_CAP`), and at last with one note per side: the user message, then the assistant messages
   after it, each replaced by its omission marker.
5. `empty`: there is no user message to start at (an import of assistant messages only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from conversations.content import (
    BLOCK_TYPES_BY_ROLE,
    TOOL_USE_ID_RE,
    Block,
    dumps_compact,
    estimate_tokens,
    is_turn_start,
    largest_block_tokens,
)
from conversations.window.blocks import (
    EMPTY_REPLY,
    EMPTY_USER_MESSAGE,
    MIN_BLOCK_CAP,
    NO_REPLY,
    NO_USER_MESSAGE,
    interrupted_result,
    is_blank_text,
    omission_marker,
    orphan_result_note,
    shorten_block,
    text_block,
)
from conversations.window.rendered import RenderedRow, RenderedRows

# Floors on the settings: below them no window is guaranteed to exist (the last-resort window of
# `squeezed` needs two short notes; a shortened block needs room for its skeleton and marker).
MIN_BUDGET = 256
MIN_ROWS = 2

USER = "user"
ASSISTANT = "assistant"


@dataclass(frozen=True)
class Limits:
    """The window's settings: BUDDY_CONTEXT_TOKENS, BUDDY_WINDOW_ROWS, BUDDY_WINDOW_LOW_WATER and
    BUDDY_MAX_PROMPT_TOKENS (the cap of one block)."""

    budget: int
    rows: int
    low_water: float
    block_cap: int

    def __post_init__(self) -> None:
        if self.budget < MIN_BUDGET:
            raise ValueError(f"BUDDY_CONTEXT_TOKENS must be at least {MIN_BUDGET}, not {self.budget}")
        if self.rows < MIN_ROWS:
            raise ValueError(f"BUDDY_WINDOW_ROWS must be at least {MIN_ROWS}, not {self.rows}")
        if not 0 < self.low_water <= 1:
            raise ValueError(f"BUDDY_WINDOW_LOW_WATER must be in (0, 1], not {self.low_water}")
        if self.block_cap < MIN_BLOCK_CAP:
            raise ValueError(f"BUDDY_MAX_PROMPT_TOKENS must be at least {MIN_BLOCK_CAP}, not {self.block_cap}")

    @property
    def low_tokens(self) -> int:
        # The epsilon keeps 0.7 × 200 at 140 whatever the float rounding.
        return math.floor(self.low_water * self.budget + 1e-9)

    @property
    def low_rows(self) -> int:
        return math.floor(self.low_water * self.rows + 1e-9)


class Row:
    """One archived message as the window sees it. `content` is decoded from `raw` (the stored JSON
    text) on first use, so rows the window never looks at are never decoded; `created_at` likewise
    from `created` (the stored time as text, ISO 8601, UTC when it names no offset)."""

    __slots__ = ("id", "role", "tokens", "is_turn_start", "largest_block_tokens", "_raw", "_content", "_created")

    def __init__(
        self,
        id: int,
        role: str,
        tokens: int,
        is_turn_start: bool,
        largest_block_tokens: int,
        *,
        content: list[Block] | None = None,
        raw: str | None = None,
        created: str | None = None,
    ) -> None:
        self.id = id
        self.role = role
        self.tokens = tokens
        self.is_turn_start = is_turn_start
        self.largest_block_tokens = largest_block_tokens
        self._raw = raw
        self._content = content
        self._created = created

    @property
    def content(self) -> list[Block]:
        if self._content is None:
            decoded: Any = json.loads(self._raw) if self._raw is not None else []
            self._content = decoded if isinstance(decoded, list) else [text_block(str(decoded))]
        return self._content

    @property
    def decoded(self) -> bool:
        return self._content is not None

    @property
    def raw(self) -> str | None:
        """The stored JSON text the content is decoded from (None: the row was made from content)."""
        return self._raw

    @property
    def created_at(self) -> datetime:
        """When the message was archived (the row must have been read with its `created`)."""
        if self._created is None:
            raise ValueError(f"row {self.id} was read without its time")
        at = datetime.fromisoformat(self._created)
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)

    def content_adopt(self, content: list[Block]) -> None:
        """Take `content`, decoded from this row's very `raw` elsewhere, instead of decoding it here."""
        self._content = content

    def __repr__(self) -> str:
        return f"Row(#{self.id} {self.role} {self.tokens}t{' turn' if self.is_turn_start else ''})"


@dataclass(slots=True)
class Piece:
    """What one archived row adds to a window: its message, maybe a synthetic one before it."""

    messages: list[dict[str, Any]]
    message_ids: list[int | None]
    tokens: int


@dataclass(frozen=True)
class Plan:
    """The decision: `start` is an index into the rows (None: no window possible)."""

    start: int | None
    mode: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    message_ids: list[int | None] = field(default_factory=list)
    tokens: int = 0
    # The row the window started at before this plan (None: there was no valid one).
    effective_start: int | None = None
    # Where a step due now would move the start (a turn start), None when none would do.
    next_start: int | None = None

    @property
    def moved(self) -> bool:
        return self.start is not None and self.start != self.effective_start


def _message(role: str, content: list[Block]) -> dict[str, Any]:
    return {"role": role, "content": content}


class Renderer:
    """Renders rows as sent, with one block cap. Caches per row, so each row is decoded, shortened and
    cleaned at most once per plan; with `shared`, a row read from the archive (it has its stored text)
    is decoded and cleaned once for as long as the shared cache keeps it."""

    def __init__(self, rows: list[Row], cap: int, shared: RenderedRows | None = None) -> None:
        self.rows = rows
        self.cap = cap
        self.shared = shared
        self._blocks: dict[int, list[Block]] = {}

    def blocks(self, index: int) -> list[Block]:
        """Row `index`'s blocks with over-cap blocks shortened and what the API refuses in any position
        cleaned out (blank text, blocks in the wrong role, repeated tool_use ids). The very list of the
        row's content when nothing changed, which tells `piece` it may use the stored estimate."""
        cached = self._blocks.get(index)
        if cached is not None:
            return cached
        row = self.rows[index]
        # Only a row not decoded yet takes the shared content: `_counted` knows an unchanged row by the
        # identity of its content list.
        shared = self.shared if row.raw is not None and not row.decoded else None
        if shared is not None:
            entry = shared.get(
                row.id, self.cap, raw=row.raw, role=row.role, largest_block_tokens=row.largest_block_tokens
            )
            if entry is not None:
                row.content_adopt(entry.content)
                self._blocks[index] = entry.blocks
                return entry.blocks
        out = self._cleaned(row)
        if shared is not None:
            shared.put(row.id, self.cap, RenderedRow(row.raw, row.role, row.largest_block_tokens, row.content, out))
        self._blocks[index] = out
        return out

    def _cleaned(self, row: Row) -> list[Block]:
        content = row.content
        needs_shortening = row.largest_block_tokens > self.cap
        out: list[Block] = []
        seen_tool_ids: set[str] = set()
        for block in content:
            if not isinstance(block, dict):
                continue
            block = _without_cache_control(block)
            if needs_shortening:
                block = shorten_block(block, cap_tokens=self.cap, message_id=row.id)
            kind = block.get("type")
            if kind == "text" and is_blank_text(block):
                continue
            if kind not in BLOCK_TYPES_BY_ROLE[row.role] and kind not in {"tool_use", "tool_result"}:
                block = text_block(f"[{str(kind)[:40]} block not sent: not allowed in a {row.role} message]")
            elif kind == "tool_use":
                tool_id = block.get("id")
                if (
                    row.role != ASSISTANT
                    or not isinstance(tool_id, str)
                    or not TOOL_USE_ID_RE.fullmatch(tool_id)
                    or tool_id in seen_tool_ids
                    or not isinstance(block.get("name"), str)
                    or not block["name"]
                    or not isinstance(block.get("input"), dict)
                ):
                    block = text_block(f"[tool call {tool_id} ({block.get('name')}) not sent: invalid here]")
                else:
                    seen_tool_ids.add(tool_id)
            elif kind == "tool_result" and row.role != USER:
                block = self._capped(orphan_result_note(block), row.id)
            out.append(block)
        if len(out) == len(content) and all(a is b for a, b in zip(out, content, strict=True)):
            return content
        return out

    def pending(self, index: int) -> list[str]:
        """The tool_use ids of row `index` that the next message must answer."""
        if self.rows[index].role != ASSISTANT:
            return []
        return [block["id"] for block in self.blocks(index) if block.get("type") == "tool_use"]

    def _capped(self, block: Block, message_id: int) -> Block:
        return shorten_block(block, cap_tokens=self.cap, message_id=message_id)

    def _counted(self, index: int, content: list[Block]) -> int:
        row = self.rows[index]
        return row.tokens if content is row.content else estimate_tokens(content)

    def piece(self, index: int, *, first: bool) -> Piece:
        """Row `index` as sent; `first`: it opens the window (so no row before it is sent). After the row
        before it, a row sends what the shared cache holds for it when both rows are as they were when
        that was made (then neither is decoded here)."""
        row = self.rows[index]
        previous = self.rows[index - 1] if not first else None
        if previous is None or self.shared is None or row.raw is None or previous.raw is None:
            return self._piece(index, first=first)
        facts = (row.raw, row.role, row.largest_block_tokens, row.tokens)
        previous_facts = (previous.raw, previous.role, previous.largest_block_tokens, previous.tokens)
        piece = self.shared.piece_get(row.id, self.cap, facts=facts, previous=previous_facts)
        if piece is None:
            piece = self._piece(index, first=False)
            self.shared.piece_put(
                row.id, self.cap, piece, facts=facts, previous_id=previous.id, previous=previous_facts
            )
        return piece

    def _piece(self, index: int, *, first: bool) -> Piece:
        row = self.rows[index]
        blocks = self.blocks(index)
        messages: list[dict[str, Any]] = []
        ids: list[int | None] = []
        tokens = 0
        previous = None if first else self.rows[index - 1]
        if row.role == USER:
            if previous is not None and previous.role == USER:
                before = [text_block(NO_REPLY)]
                messages.append(_message(ASSISTANT, before))
                ids.append(None)
                tokens += estimate_tokens(before)
            expected = self.pending(index - 1) if previous is not None else []
            answered: list[Block] = []
            answered_ids: set[str] = set()
            rest: list[Block] = []
            for block in blocks:
                if block.get("type") != "tool_result":
                    rest.append(block)
                    continue
                tool_id = block.get("tool_use_id")
                if tool_id in expected and tool_id not in answered_ids:
                    answered.append(block)
                    answered_ids.add(tool_id)
                else:
                    rest.append(self._capped(orphan_result_note(block), row.id))
            missing = [interrupted_result(tool_id) for tool_id in expected if tool_id not in answered_ids]
            content = answered + missing + rest
            if len(content) == len(blocks) and all(a is b for a, b in zip(content, blocks, strict=True)):
                content = blocks
            if not content:
                content = [text_block(EMPTY_USER_MESSAGE)]
        else:
            if previous is None:
                raise ValueError("a window cannot open with an assistant message")
            if previous.role == ASSISTANT:
                before = [interrupted_result(tool_id) for tool_id in self.pending(index - 1)]
                before = before or [text_block(NO_USER_MESSAGE)]
                messages.append(_message(USER, before))
                ids.append(None)
                tokens += estimate_tokens(before)
            content = blocks or [text_block(EMPTY_REPLY)]
        messages.append(_message(row.role, content))
        ids.append(row.id)
        tokens += self._counted(index, content)
        return Piece(messages, ids, tokens)

    def trailing(self) -> Piece | None:
        """The synthetic user message after a newest assistant message whose tool calls have no results."""
        if not self.rows:
            return None
        unanswered = self.pending(len(self.rows) - 1)
        if not unanswered:
            return None
        content = [interrupted_result(tool_id) for tool_id in unanswered]
        return Piece([_message(USER, content)], [None], estimate_tokens(content))


class _Walk:
    """One walk back from the newest row. `after[i]` is the cost (tokens, messages) of everything the
    window sends after row i; a window starting at user row i costs that plus `first(i)`."""

    def __init__(self, rows: list[Row], renderer: Renderer, lower: int) -> None:
        self.rows = rows
        self.renderer = renderer
        self.lower = lower
        self.next_index = len(rows) - 1
        self.trail = renderer.trailing()
        self.tokens = self.trail.tokens if self.trail else 0
        self.count = len(self.trail.messages) if self.trail else 0
        self.after: dict[int, tuple[int, int]] = {}
        self.pieces: dict[int, Piece] = {}
        self.firsts: dict[int, Piece] = {}

    def extend(self, max_tokens: int, max_rows: int) -> None:
        """Walk back until what comes after the current row alone exceeds the limits (then no start at
        or before it can fit them, whatever its own size) or the lowest possible start is reached."""
        while self.next_index >= self.lower:
            if self.tokens > max_tokens or self.count > max_rows:
                return
            index = self.next_index
            self.after[index] = (self.tokens, self.count)
            if index > self.lower:
                piece = self.renderer.piece(index, first=False)
                self.pieces[index] = piece
                self.tokens += piece.tokens
                self.count += len(piece.messages)
            self.next_index -= 1

    def cost(self, index: int) -> tuple[int, int] | None:
        """(tokens, messages) of the window starting at user row `index`; None when not walked to."""
        if index not in self.after or self.rows[index].role != USER:
            return None
        first = self.firsts.get(index)
        if first is None:
            first = self.firsts[index] = self.renderer.piece(index, first=True)
        tokens, count = self.after[index]
        return first.tokens + tokens, len(first.messages) + count

    def assemble(self, start: int) -> tuple[list[dict[str, Any]], list[int | None], int]:
        self.cost(start)
        parts = [self.firsts[start]] + [self.pieces[i] for i in range(start + 1, len(self.rows))]
        if self.trail is not None:
            parts.append(self.trail)
        messages = [message for part in parts for message in part.messages]
        ids = [message_id for part in parts for message_id in part.message_ids]
        return messages, ids, sum(part.tokens for part in parts)


def _without_cache_control(block: Block) -> Block:
    """The block without `cache_control`, also inside a tool_result (the block itself when it has none).
    Buddy places the breakpoints itself; one stored in the archive (an import) could be a fifth."""
    inner = block.get("content")
    inner_marked = isinstance(inner, list) and any(isinstance(item, dict) and "cache_control" in item for item in inner)
    if "cache_control" not in block and not inner_marked:
        return block
    block = {key: value for key, value in block.items() if key != "cache_control"}
    if inner_marked:
        block["content"] = [
            {key: value for key, value in item.items() if key != "cache_control"} if isinstance(item, dict) else item
            for item in inner
        ]
    return block


def _fits(cost: tuple[int, int] | None, max_tokens: int, max_rows: int) -> bool:
    return cost is not None and cost[0] <= max_tokens and cost[1] <= max_rows


def effective_start_id(rows: list[Row], stored_start: int) -> int | None:
    """The id of the row the window starts at according to the stored start, given every row with
    id >= stored_start: the stored row itself when it is a user message (a turn start, or the user
    message a fallback started at), else the first turn start after it (the stored start is 0 before
    the first step, and an import may begin with assistant messages or tool results). None: no row."""
    if rows and rows[0].id == stored_start and rows[0].role == USER:
        return stored_start
    return next((row.id for row in rows if row.is_turn_start), None)


def plan_window(
    rows: list[Row], *, effective_start_id: int | None, limits: Limits, shared: RenderedRows | None = None
) -> Plan:
    """Decide the window over `rows`: ascending ids, the newest rows with id >= the stored start — all
    of them, or at least the newest `limits.rows + 1`. `effective_start_id` is where the stored start
    puts the window (see `effective_start_id`); when it is older than every row here, the window from
    it holds more rows than the cap allows. `shared`: a cache of rendered rows that outlives this plan
    (`rendered.rendered_rows`). See the module docstring for the rules."""
    if not rows:
        return Plan(start=None, mode="empty")
    effective = next((i for i, row in enumerate(rows) if row.id == effective_start_id), None)
    lower = effective if effective is not None else 0
    after_effective = effective if effective is not None else -1
    walk = _Walk(rows, Renderer(rows, limits.block_cap, shared), lower)

    def chosen(start: int, mode: str) -> Plan:
        messages, ids, tokens = walk.assemble(start)
        next_start = next(
            (
                i
                for i in range(start + 1, len(rows))
                if rows[i].is_turn_start and _fits(walk.cost(i), limits.low_tokens, limits.low_rows)
            ),
            None,
        )
        return Plan(start, mode, messages, ids, tokens, effective, next_start)

    # 1. The stored start stays while its window fits.
    if effective is not None:
        walk.extend(limits.budget, limits.rows)
        if _fits(walk.cost(effective), limits.budget, limits.rows):
            return chosen(effective, "stored")
    # 2. A step to the first turn start at which the window holds at most the low-water mark. Every such
    # start lies within the part of the walk that stays under that mark.
    walk.extend(limits.low_tokens, limits.low_rows)
    candidates = sorted(i for i in walk.after if i > after_effective)
    for i in candidates:
        if rows[i].is_turn_start and _fits(walk.cost(i), limits.low_tokens, limits.low_rows):
            return chosen(i, "step")
    walk.extend(limits.budget, limits.rows)
    candidates = sorted(i for i in walk.after if i > after_effective)
    for i in reversed(candidates):
        if rows[i].is_turn_start and _fits(walk.cost(i), limits.budget, limits.rows):
            return chosen(i, "step")
    # 3. Inside the newest turn, at a user message of tool results.
    newest_turn_start = max((i for i in range(lower, len(rows)) if rows[i].is_turn_start), default=-1)
    inside = [i for i in candidates if i > max(after_effective, newest_turn_start) and rows[i].role == USER]
    for i in inside:
        if _fits(walk.cost(i), limits.low_tokens, limits.low_rows):
            return chosen(i, "inside_turn")
    for i in reversed(inside):
        if _fits(walk.cost(i), limits.budget, limits.rows):
            return chosen(i, "inside_turn")
    # 4. Squeezed, from the newest user message.
    newest_user = max((i for i in range(lower, len(rows)) if rows[i].role == USER), default=None)
    if newest_user is None:
        return Plan(start=None, mode="empty", effective_start=effective)
    return _squeezed(rows, newest_user, limits, effective, shared)


def _squeezed(rows: list[Row], start: int, limits: Limits, effective: int | None, shared: RenderedRows | None) -> Plan:
    cap = limits.block_cap // 2
    while cap >= MIN_BLOCK_CAP:
        walk = _Walk(rows, Renderer(rows, cap, shared), start)
        walk.extend(limits.budget, limits.rows)
        if _fits(walk.cost(start), limits.budget, limits.rows):
            messages, ids, tokens = walk.assemble(start)
            return Plan(start, "squeezed", messages, ids, tokens, effective)
        cap //= 2
    # Last resort: one note for the user message, one for the assistant messages after it (there are no
    # user messages after it, it is the newest). Two short text messages always fit the floors.
    first = rows[start]
    messages = [_message(USER, [text_block(omission_marker(len(dumps_compact(first.content)), first.id))])]
    ids: list[int | None] = [first.id]
    tail = rows[start + 1 :]
    if tail:
        omitted = sum(len(dumps_compact(row.content)) for row in tail)
        if len(tail) == 1:
            note = omission_marker(omitted, tail[0].id)
        else:
            note = f"[… {omitted} characters omitted from messages {tail[0].id} to {tail[-1].id}]"
        messages.append(_message(ASSISTANT, [text_block(note)]))
        ids.append(tail[-1].id)
    tokens = sum(estimate_tokens(message["content"]) for message in messages)
    return Plan(start, "squeezed", messages, ids, tokens, effective)


def row_from_content(message_id: int, role: str, content: list[Block], *, stored: bool = False) -> Row:
    """A Row with its facts computed as `message_build` computes them on write (for tests and tools).
    `stored`: the Row holds the content's JSON text, as the window's query reads it, not the content."""
    facts = (estimate_tokens(content), is_turn_start(role, content), largest_block_tokens(content))
    if stored:
        return Row(message_id, role, *facts, raw=json.dumps(content))
    return Row(message_id, role, *facts, content=content)
