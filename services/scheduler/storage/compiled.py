"""Write statements compiled once to the driver's SQL, for the storage layer's hot paths: a row's
parameters laid out as the driver wants them (`RawWrite`), and many rows of one INSERT as one
multi-row statement on PostgreSQL (`MultiRowInsert`). See `connection.Storage._write` for why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Engine, Executable, Insert
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

Params = Mapping[str, Any]


class RawWrite:
    """A write statement as its DBAPI SQL and how to lay out one row of its parameters (in the
    order of the `?`s, or as a dict), with the type processing SQLAlchemy would apply."""

    def __init__(self, statement: Executable, sample: Params, engine: Engine, dialect: Any = None) -> None:
        if not isinstance(statement, ClauseElement):
            raise TypeError(f"not a SQL statement: {statement!r}")
        compiled = statement.compile(dialect=dialect or engine.dialect, column_keys=list(sample))
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"not a SQL statement: {statement!r}")
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("a statement with expanding parameters (IN lists) needs SQLAlchemy to run it")
        constants = compiled.construct_params(_check=False) or {}
        self.sql: str = compiled.string
        self.names = list(compiled.positiontup or ()) if compiled.positional else None
        self.constants = {k: v for k, v in constants.items() if k not in sample}
        # SQLAlchemy's own (private) map of parameter name -> type processor (a callable for DML).
        self.processors: dict[str, Any] = dict(compiled._bind_processors)
        if self.names is not None:
            self.processed = [
                (i, self.processors[n]) for i, n in enumerate(self.names) if n in self.processors
            ]
            # The row in the `?`s' order, taken in C: this runs for every deferred row.
            self.take = itemgetter(*self.names) if len(self.names) > 1 and not self.constants else None

    def positional_order(self, keys: tuple[str, ...]) -> None:
        """Prepares `from_tuple` for rows given in `keys` order; `as_is` when they need nothing."""
        self.keys = keys
        self.order: Any = None  # the `?`s' values as a list from a tuple, or None: through a dict
        if self.names is not None and not self.constants and set(self.names) <= set(keys):
            positions = [keys.index(n) for n in self.names]
            if positions == list(range(len(keys))):
                self.order = list  # trial saves: in order, only their float is processed
            elif len(positions) > 1:
                take = itemgetter(*positions)
                self.order = lambda values: list(take(values))
        self.as_is = self.names == list(keys) and not self.processed and not self.constants

    def from_tuple(self, values: tuple[Any, ...]) -> Any:
        if self.order is None:
            return self.row(dict(zip(self.keys, values, strict=True)))
        out = self.order(values)
        for i, process in self.processed:
            out[i] = process(out[i])
        return out

    def row(self, params: Params) -> Any:
        if self.names is not None:
            if self.take is not None:
                if not self.processed:
                    return self.take(params)
                values = list(self.take(params))
            else:
                values = [params[n] if n in params else self.constants[n] for n in self.names]
            for i, process in self.processed:
                values[i] = process(values[i])
            return values
        if not (self.constants or self.processors):
            return params
        row = {**self.constants, **params}
        for name, process in self.processors.items():
            row[name] = process(row[name])
        return row


class MultiRowInsert:
    """`INSERT ... VALUES (row), (row), ...` for `size` rows as SQLAlchemy compiles it for PostgreSQL
    with `$n` placeholders (sent as is on a raw cursor: psycopg parses a statement over 4 KB anew
    on every call otherwise, 0.5 ms for 16 steps), with where each row's values go."""

    def __init__(self, statement: Insert, keys: list[str], size: int, dialect: Any) -> None:
        marked = [{k: (i, k) for k in keys} for i in range(size)]
        compiled = statement.values(marked).compile(dialect=dialect)
        self.sql: str = compiled.string
        marks = compiled.construct_params()
        self.places = [marks[name] for name in compiled.positiontup or ()]  # (row, column) of each $n

    def params(self, rows: Sequence[Params]) -> list[Any]:
        return [rows[i][k] for i, k in self.places]


def dialect_class(engine: Engine) -> type[DefaultDialect]:
    """The engine's dialect class, to make a variant of it (another paramstyle)."""
    return cast("type[DefaultDialect]", type(engine.dialect))
