"""Querysets whose SQL Django builds once: the few reads every turn makes.

Building a queryset (its filters' lookups resolved) and compiling it to SQL costs Django more CPU
than SQLite spends running the query: for the reads of a plain turn, more than all of their trips to
the database together (docs/benchmarks.md, "Where a turn's CPU goes"). A `PreparedQuery` builds its
queryset once per process, from stand-in values (twice, from two sets of them, to check that the
SQL and its constants do not change with the values), compiles it, and from then on runs that SQL
with each call's values in the stand-ins' places. The rows become model instances (or values) the
way the queryset itself makes them: by its own iterable, from its own compiler's column list.

What it takes: a function that builds the queryset from keyword values, the same SQL whatever the
values (no `timezone.now()` inside, no list whose length varies), each value an int or a str that
reaches the SQL as one parameter, unchanged (an id, a slug, a chat id: not a datetime or a model
instance, which Django adapts). A queryset that breaks these rules is refused when the query is first
prepared: a value that does not reach the SQL, or not unchanged, or SQL or constants that differ
between the two sets of stand-ins (a time taken when built; a value computed from another, cut or
stripped in Python). A branch on a value that both sets take alike (`chat_id or "main"`) is not seen.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import EmptyResultSet
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
        # Built twice, from stand-ins as unlike as they can be: a queryset whose SQL takes its values as they
        # were given builds the same SQL, with the stand-ins in the same places and the same constants.
        queryset, compiler, sql, slots = self._compile_from(0)
        if not _same(self._compile_from(1)[2:], (sql, slots)):
            raise NotPreparable(f"the SQL is not the same for other values (a time, a value computed): {sql}")
        return _Prepared(queryset=queryset, compiler=compiler, sql=sql, slots=slots)

    def _compile_from(self, stand_in_set: int) -> tuple[QuerySet, Any, str, tuple[tuple[str, Any], ...]]:
        stand_ins = {name: _stand_in(kind, n, stand_in_set) for n, (name, kind) in enumerate(self.kinds.items())}
        names = {(type(value), value): name for name, value in stand_ins.items()}
        queryset = self.build(**stand_ins)
        compiler = queryset.query.get_compiler(using=queryset.db)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:
            sql, params = "", ()
        if not sql:
            raise NotPreparable(
                "the queryset has no SQL to run: it is empty whatever the values, or a stand-in is out of its "
                "column's range"
            )
        slots = tuple(_slot(param, names) for param in params)
        placed = {slot[1] for slot in slots if slot[0] == "value"}
        placed |= {item for slot in slots if slot[0] == "values" for item in slot[1] if isinstance(item, _Name)}
        for name, value in stand_ins.items():
            if name not in placed or str(value) in sql:
                raise NotPreparable(f"{name} does not reach the SQL as a parameter of its own: {sql}")
        return queryset, compiler, sql, slots


class _Name(str):
    """A value's name in a list parameter's slot (the list's other items are constants)."""


def _stand_in(kind: type, n: int, stand_in_set: int) -> int | str:
    # Values no id or name takes; the int inside a 32-bit column's range (Django reads no rows for a
    # value outside it, and puts none in the SQL). The string holds what a lookup that rewrites its
    # value changes (the LIKE wildcards and escape `iexact` escapes, the quote JSON adds, letters of both
    # cases), so such a lookup is refused instead of running without its rewrite. The second set differs
    # from the first in its spacing, its ends and its length, so that a value computed from another, cut
    # or stripped in Python, differs between the two.
    if stand_in_set == 0:
        return 2_147_000_000 + n if kind is int else f"\ue000%_\\'\"Prepared-{n}\ue000"
    return 2_146_000_000 + 1000 * n if kind is int else f" \ue001%_\\'\"Prepared-{n}-{'x' * 1000}\ue001 "


def _same(one: Any, other: Any) -> bool:
    """Equal, and of the same types all the way down (a constant True is not a constant 1)."""
    if type(one) is not type(other):
        return False
    if isinstance(one, list | tuple):
        return len(one) == len(other) and all(_same(a, b) for a, b in zip(one, other, strict=True))
    return bool(one == other)


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
