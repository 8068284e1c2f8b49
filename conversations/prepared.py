"""Querysets whose SQL Django builds once: the few reads every turn makes.

Building a queryset (its filters' lookups resolved) and compiling it to SQL costs Django more CPU
than SQLite spends running the query: for the reads of a plain turn, more than all of their trips to
the database together (docs/benchmarks.md, "Where a turn's CPU goes"). A `PreparedQuery` builds its
queryset once per process, from stand-in values, compiles it once, and from then on runs that SQL
with each call's values in the stand-ins' places. The rows become model instances (or values) the
way the queryset itself makes them: by its own iterable, from its own compiler's column list.

What it takes: a function that builds the queryset from keyword values, the same SQL whatever the
values (no `timezone.now()` inside, no list whose length varies), each value an int or a str that
reaches the SQL as one parameter, unchanged (an id, a slug, a chat id: not a datetime or a model
instance, which Django adapts). Anything else is refused when the query is first prepared, never
run wrong.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet


class NotPreparable(TypeError):
    """The queryset's SQL does not carry each value as a parameter of its own."""


@dataclass(frozen=True)
class _Prepared:
    queryset: QuerySet
    compiler: Any  # the queryset's compiler after as_sql(): its select list and converters are set
    sql: str
    # One per parameter: ("value", name), ("values", (name or constant, …)) for a list parameter, or
    # ("constant", value).
    slots: tuple[tuple[str, Any], ...]


class PreparedQuery:
    """`build(**values)` → a queryset; `rows(**values)` → its rows, the SQL built once.

    `kinds` names each value and its type (int or str), e.g. `PreparedQuery(build, session_id=int)`.
    The queryset's order and slice are part of what `build` returns: `rows(...)[:1]` fetches every row.
    """

    def __init__(self, build: Callable[..., QuerySet], /, **kinds: type) -> None:
        for name, kind in kinds.items():
            if kind not in (int, str):
                raise NotPreparable(f"{name}: only int and str values can be prepared, not {kind.__name__}")
        self.build = build
        self.kinds = kinds
        self._prepared: _Prepared | None = None
        self._lock = threading.Lock()

    def rows(self, **values: Any) -> list[Any]:
        prepared = self._prepared or self._prepare()
        for name, kind in self.kinds.items():
            if type(values[name]) is not kind:
                raise TypeError(f"{name} must be {kind.__name__}, not {type(values[name]).__name__}")
        params = tuple(_param(slot, values) for slot in prepared.slots)
        queryset = prepared.queryset._chain()
        template, sql = prepared.compiler, prepared.sql

        def get_compiler(using: str | None = None, connection: Any = None, elide_empty: bool = True) -> Any:
            compiler = copy.copy(template)
            compiler.connection = connection if connection is not None else connections[using]
            compiler.as_sql = lambda *args, **kwargs: (sql, params)
            return compiler

        # Only this copy of the query answers with the prepared compiler, and it never leaves here.
        queryset.query.get_compiler = get_compiler
        return list(queryset)

    def _prepare(self) -> _Prepared:
        with self._lock:
            if self._prepared is None:
                self._prepared = self._compile()
            return self._prepared

    def _compile(self) -> _Prepared:
        stand_ins = {name: _stand_in(kind, n) for n, (name, kind) in enumerate(self.kinds.items())}
        names = {(type(value), value): name for name, value in stand_ins.items()}
        queryset = self.build(**stand_ins)
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        slots = tuple(_slot(param, names) for param in params)
        placed = {slot[1] for slot in slots if slot[0] == "value"}
        placed |= {item for slot in slots if slot[0] == "values" for item in slot[1] if isinstance(item, _Name)}
        for name, value in stand_ins.items():
            if name not in placed or str(value) in sql:
                raise NotPreparable(f"{name} does not reach the SQL as a parameter of its own: {sql}")
        return _Prepared(queryset=queryset, compiler=compiler, sql=sql, slots=slots)


class _Name(str):
    """A value's name in a list parameter's slot (the list's other items are constants)."""


def _stand_in(kind: type, n: int) -> int | str:
    # Values no id or name takes; the int inside a 32-bit column's range (Django reads no rows for a
    # value outside it, and puts none in the SQL). The string holds what a lookup that rewrites its
    # value changes (the LIKE wildcards and escape `iexact` escapes, the quote JSON adds, letters of both
    # cases), so such a lookup is refused instead of running without its rewrite.
    return 2_147_000_000 + n if kind is int else f"\ue000%_\\'\"Prepared-{n}\ue000"


def _slot(param: Any, names: dict[tuple[type, Any], str]) -> tuple[str, Any]:
    if type(param) in (int, str) and (type(param), param) in names:
        return ("value", names[type(param), param])
    if isinstance(param, list | tuple):
        items = tuple(
            _Name(names[type(item), item]) if type(item) in (int, str) and (type(item), item) in names else item
            for item in param
        )
        if any(isinstance(item, _Name) for item in items):
            return ("values", items)
    return ("constant", param)


def _param(slot: tuple[str, Any], values: dict[str, Any]) -> Any:
    kind, payload = slot
    if kind == "value":
        return values[payload]
    if kind == "values":
        return [values[item] if isinstance(item, _Name) else item for item in payload]
    return payload
