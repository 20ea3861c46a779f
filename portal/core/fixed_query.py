"""Queries of every request whose shape never changes, compiled to SQL once per process.

The session, the second factor's device and the navigation's grants are read on every page; only their values (a
session key, a user, the time) change from one request to the next. Building and compiling a query with the ORM
costs 0.5 to 1 ms of Python each time, sending a compiled statement with new parameters a tenth of that.
``FixedQuery`` compiles the ORM's own query once (its SQL, its parameters, its columns' converters) and then runs
that statement with the request's values in their places. See docs/figures.md, "Run D".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.models import Model, QuerySet
from django_scopes import get_scope, scopes_disabled


class FixedQuery:
    """``build(**values)`` returns the query (a ``values_list``) for those values; ``samples`` names each value
    with two different examples of it. The query is compiled with the first examples, then once more for each
    value with its second example: the SQL must be the same every time, and the parameters that change are that
    value's places. Anything else about the query (its constants, its expressions) is fixed at the first call.

    A value the ORM would have prepared for the database other than as it is (a date and time on SQLite) is
    prepared as the ORM prepares a date and time column's; a value prepared otherwise is refused when compiled.
    """

    def __init__(self, build: Callable[..., QuerySet], **samples: tuple[Any, Any]):
        for name, pair in samples.items():
            if len(pair) != 2 or pair[0] == pair[1]:
                raise ValueError(f"FixedQuery: {name} needs two different sample values, not {pair!r}")
        self.build, self.samples = build, samples
        self._compiled: dict[str, _Compiled] = {}
        self._query_alias: str | None = None

    def reset(self) -> None:
        """Compile again at the next call (what ``build`` reads has changed)."""
        self._compiled, self._query_alias = {}, None

    def columns(self) -> list[str]:
        """The names of the rows' columns, in order (the ``values_list`` names)."""
        return self._compile(self._alias()).columns

    def rows(self, **values: Any) -> list[tuple]:
        if values.keys() != self.samples.keys():
            raise TypeError(f"FixedQuery: give {sorted(self.samples)}, not {sorted(values)}")
        compiled = self._compile(self._alias())
        connection = connections[compiled.alias]
        params = list(compiled.params)
        for name, places in compiled.places.items():
            value = _prepared(values[name], connection)
            for place in places:
                params[place] = value
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if compiled.converters:  # what the ORM does to the values it reads (SQLite's dates and times, JSON)
            rows = [_converted(row, compiled.converters, connection) for row in rows]
        return rows

    def alias(self) -> str:
        """The database the query reads."""
        return self._alias()

    def instances(self, model, **values: Any) -> list:
        """The rows as instances of ``model``, as the ORM makes them (``Model.from_db``): the query's columns are
        attnames of its fields, in the order of its fields; the others are deferred."""
        columns = self.columns()
        if columns != [field.attname for field in model._meta.concrete_fields if field.attname in columns]:
            raise ImproperlyConfigured(f"FixedQuery: columns {columns} are not {model.__name__}'s fields in order")
        alias = self.alias()
        return [model.from_db(alias, columns, row) for row in self.rows(**values)]

    def _alias(self) -> str:
        alias = self._query_alias
        if alias is None:
            alias = self._query_alias = self.build(**self._firsts()).db
        return alias

    def _firsts(self) -> dict[str, Any]:
        return {name: pair[0] for name, pair in self.samples.items()}

    def _compile(self, alias: str) -> _Compiled:
        compiled = self._compiled.get(alias)
        if compiled is not None:
            return compiled
        connection = connections[alias]
        firsts = self._firsts()
        queryset = self.build(**firsts)
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        places: dict[str, list[int]] = {}
        for name, (first, second) in self.samples.items():
            other_sql, other_params = self.build(**{**firsts, name: second}).query.get_compiler(using=alias).as_sql()
            if other_sql != sql or len(other_params) != len(params):
                raise ImproperlyConfigured(f"FixedQuery: the query's SQL changes with {name}; it cannot be fixed")
            places[name] = [place for place, (a, b) in enumerate(zip(params, other_params, strict=True)) if a != b]
            if not places[name]:
                raise ImproperlyConfigured(f"FixedQuery: {name} is not a parameter of the query")
            for place in places[name]:
                if params[place] != _prepared(first, connection):
                    raise ImproperlyConfigured(f"FixedQuery: the ORM prepares {name} as {params[place]!r}, "
                                               f"not as {_prepared(first, connection)!r}")
        taken = [place for name_places in places.values() for place in name_places]
        if len(taken) != len(set(taken)):
            raise ImproperlyConfigured("FixedQuery: two values share a parameter; give them other samples")
        query = queryset.query
        columns = [*query.extra_select, *query.values_select, *query.annotation_select]
        selected = [column[0] for column in compiler.select[: compiler.col_count]]
        if len(columns) != len(selected):
            raise ImproperlyConfigured("FixedQuery: build() must return a values_list query")
        compiled = _Compiled(alias, sql, tuple(params), places, compiler.get_converters(selected), columns)
        self._compiled[alias] = compiled
        return compiled


class _Compiled:
    def __init__(self, alias, sql, params, places, converters, columns):
        self.alias, self.sql, self.params, self.places = alias, sql, params, places
        self.converters, self.columns = converters, columns


def _converted(row: tuple, converters: dict, connection) -> tuple:
    """``SQLCompiler.apply_converters`` for one row, with this thread's connection."""
    row = list(row)
    for place, (functions, expression) in converters.items():
        value = row[place]
        for function in functions:
            value = function(value, expression, connection)
        row[place] = value
    return tuple(row)


def _prepared(value: Any, connection) -> Any:
    """A value as the ORM hands it to the database driver (a date and time column's preparation for datetimes)."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def in_study(build: Callable[..., QuerySet], **samples: tuple[Any, Any]) -> FixedQuery:
    """A ``FixedQuery`` of one study's rows: ``build(study_id, **values)`` writes the study scope's filter out
    (it runs with scopes disabled), so that the study is a parameter like the others (``scoped_study_id``)."""
    def query(study_id: int, **values: Any) -> QuerySet:
        with scopes_disabled():
            return build(study_id, **values)
    return FixedQuery(query, study_id=(1, 2), **samples)


def scoped_study_id() -> int | None:
    """The study that the active scope narrows every scoped query to, if it is one study; else None."""
    current = get_scope()
    study = current.get("study")
    if not current.get("_enabled", True) or study is None or isinstance(study, list | tuple):
        return None
    return study.pk if isinstance(study, Model) else study
