"""What model calls cost in money, from `BUDDY_PRICES` (README: Settings): per model, the price of a
million tokens of each kind — input, output, cache read, cache write with the 5-minute lifetime and,
optionally, with the 1-hour lifetime (by default priced as the provider does, INPUT_PRICE × input).

    BUDDY_PRICES="claude-sonnet-5-5=3,15,0.3,3.75;claude-haiku-5-5=1,5,0.1,1.25"

A name prices that model and its dated snapshots (`claude-sonnet-5-5` prices `claude-sonnet-5-5-20261001`).
Prices are US dollars, as the provider's price list gives them.
Without the setting, or for a model it does not name, costs are shown in tokens only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.db.models import Count, QuerySet, Sum

from conversations.models import INPUT_PRICE, ModelCall

MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]*")
DATED_SNAPSHOT_RE = re.compile(r"(.+)-\d{8}")
TOKENS_PER_PRICE = 1_000_000
# The fields of ModelCall each price applies to.
PRICED_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_5m_input_tokens",
    "cache_creation_1h_input_tokens",
)


class PricesInvalid(ValueError):
    """BUDDY_PRICES cannot be read; the message says where and why."""


@dataclass(frozen=True)
class ModelPrice:
    """Per million tokens, in US dollars (as the provider's price list gives them)."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float

    def cost(self, usage: Mapping[str, int | None]) -> float:
        """What these token counts (ModelCall's fields, or their sums) cost."""
        prices = (self.input, self.output, self.cache_read, self.cache_write_5m, self.cache_write_1h)
        return sum(price * (usage.get(name) or 0) for name, price in zip(PRICED_FIELDS, prices, strict=True)) / (
            TOKENS_PER_PRICE
        )


def prices_parse(text: str) -> dict[str, ModelPrice]:
    """`name=input,output,cache_read,cache_write[,cache_write_1h]` items separated by `;`. Raises PricesInvalid."""
    prices: dict[str, ModelPrice] = {}
    for position, item in enumerate(text.split(";"), start=1):
        if not item.strip():
            continue
        name, equals, numbers = (part.strip() for part in item.partition("="))
        where = f"item {position} ({item.strip()!r})"
        if not equals or not MODEL_NAME_RE.fullmatch(name):
            raise PricesInvalid(f"{where}: expected MODEL=INPUT,OUTPUT,CACHE_READ,CACHE_WRITE with a model id first")
        if name in prices:
            raise PricesInvalid(f"{where}: {name} is priced twice")
        values = [value.strip() for value in numbers.split(",")]
        if len(values) not in (4, 5):
            raise PricesInvalid(
                f"{where}: expected 4 prices (input, output, cache read, cache write) or 5 (and the 1-hour "
                f"cache write), not {len(values)}"
            )
        try:
            parsed = [float(value) for value in values]
        except ValueError:
            raise PricesInvalid(f"{where}: every price must be a number, e.g. 3 or 0.3") from None
        if not all(math.isfinite(value) and value >= 0 for value in parsed):
            raise PricesInvalid(f"{where}: a price must be a finite number of at least 0")
        if len(parsed) == 4:
            parsed.append(parsed[0] * INPUT_PRICE["cache_creation_1h_input_tokens"])
        prices[name] = ModelPrice(*parsed)
    return prices


@cache
def _prices_of(text: str) -> dict[str, ModelPrice]:
    return prices_parse(text)


def prices() -> dict[str, ModelPrice]:
    """The prices BUDDY_PRICES sets (empty when unset); the system check has refused a bad value."""
    return _prices_of(settings.BUDDY_PRICES)


def price_for(model: str) -> ModelPrice | None:
    """The price of `model`: its own, or that of the model it is a dated snapshot of (NAME-YYYYMMDD)."""
    known = prices()
    snapshot = DATED_SNAPSHOT_RE.fullmatch(model)
    return known.get(model) or (known.get(snapshot.group(1)) if snapshot else None)


@dataclass(frozen=True)
class CallsCost:
    """What some model calls cost: `amount` for those whose model is priced, and how many are not."""

    amount: float
    unpriced_calls: int


def calls_cost(calls: QuerySet[ModelCall]) -> CallsCost | None:
    """The cost of these calls in money (one grouped query); None when BUDDY_PRICES is not set."""
    if not prices():
        return None
    amount, unpriced = 0.0, 0
    for row in calls.order_by().values("model").annotate(calls=Count("id"), **{f: Sum(f) for f in PRICED_FIELDS}):
        price = price_for(row["model"])
        if price is None:
            unpriced += row["calls"]
        else:
            amount += price.cost(row)
    return CallsCost(amount=amount, unpriced_calls=unpriced)


def money(amount: float) -> str:
    """An amount as the admin shows it: dollars (the provider bills in them) to a hundredth of a cent."""
    return f"${amount:,.4f}"
