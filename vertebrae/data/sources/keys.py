"""What every source format shares: the :class:`SourceFormat` record a format module ends with, and the helpers of
a declaration's keys (key paths in messages, path resolution, row ranges).

Messages start with the key path (``where`` + ``.key``); see :mod:`vertebrae.data.sources`. The formats import this
module, :mod:`vertebrae.data.sources.registry` imports the formats: no circle.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError

#: The default of a key a declaration must give.
_REQUIRED = object()

#: Keys whose value is a file path (resolved against ``base_dir``; its bytes are the ``files`` identity by default).
_PATH_KEYS = frozenset({"path", "labels_path", "ids_path", "groups_path"})

_MAX_LISTED = 50  # cap on names listed in "available ..." messages

Counter = Callable[[dict[str, Any], Path, str], int]
Loader = Callable[[dict[str, Any], Path, str, Any], Any]  # -> SourceData
GroupsReader = Callable[[dict[str, Any], Path, str], "list | None"]
LabelsOnly = Callable[[dict[str, Any], Path, str], "str | None"]
FilesRecipe = Callable[[dict[str, Any], Path, str, Any], dict[str, Any]]  # (opts, base_dir, where, digests)


@dataclass(frozen=True)
class SourceFormat:
    """One source ``type:``: what its declaration holds and how its rows are read.

    ``keys``: its keys besides ``type``, in order (the order of messages and recipes), with their defaults
    (``_REQUIRED`` for a mandatory key). Every value is a non-empty string, a non-empty path string for a key of
    ``_PATH_KEYS``, or whatever ``values[key](value, where)`` returns (it raises ConfigError otherwise).
    ``check(opts, where)``: the type's own checks of the filled-in declaration (ConfigError).

    The readers take the checked options, the folder relative paths resolve against and ``where``:
    ``count`` (rows, read cheaply: planning counts without reading the data), ``load`` (with ``rows``, a ``(start,
    stop)`` or None: a :class:`~vertebrae.data.sources.checks.SourceData`); ``groups_key`` names the key of the
    rows' independence groups and ``groups`` reads them without the features; ``labels_only`` says why the source
    holds labels but no features, or None.

    ``files_recipe(opts, base_dir, where, digests)``: the ``files`` identity recipe where it is not the generic one
    (the options, each path key's file replaced by its digest); ``tracked=False`` for a source that reads no file of
    the user's (it must declare an identity).
    """

    keys: Mapping[str, Any]
    count: Counter
    load: Loader
    check: Callable[[dict[str, Any], str], None] | None = None
    values: Mapping[str, Callable[[Any, str], Any]] = field(default_factory=dict)
    groups_key: str | None = None
    groups: GroupsReader | None = None
    labels_only: LabelsOnly | None = None
    files_recipe: FilesRecipe | None = None
    tracked: bool = True

    def __post_init__(self) -> None:
        if (self.groups_key is None) != (self.groups is None):
            raise ValueError("a SourceFormat's groups_key and groups reader come together")
        if self.groups_key is not None and self.groups_key not in self.keys:
            raise ValueError(f"groups_key {self.groups_key!r} is not one of the format's keys")


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _label(where: str) -> str:
    return where or "source"


def _listing(names: Sequence[str]) -> str:
    names = list(names)
    if not names:
        return "(none)"
    shown = ", ".join(repr(n) for n in names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        shown += f", ... ({len(names) - _MAX_LISTED} more)"
    return shown


def check_groups_column(opts: Mapping[str, Any], where: str) -> None:
    """A table's ``groups_column`` must be none of its label, id or input columns."""
    if opts["groups_column"] is None:
        return
    others = {opts.get("label_column"), opts.get("id_column"), opts.get("text_column"), opts.get("image_column")}
    if opts["groups_column"] in others - {None}:
        raise ConfigError(f"{_key(where, 'groups_column')}: {opts['groups_column']!r} is also the label, id or "
                          "input column; groups need a column of their own")


def _resolve(opts: Mapping[str, Any], key: str, base_dir: Path, where: str) -> Path | None:
    raw = opts[key]
    if raw is None:
        return None
    path = Path(raw)
    if not path.is_absolute():
        path = base_dir / path
    if not path.exists():
        raise ConfigError(f"{_key(where, key)}: file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"{_key(where, key)}: not a file: {path}")
    return path


def _parse_rows(rows: Any, where: str) -> tuple[int, int] | None:
    if rows is None:
        return None
    try:
        start, stop = rows
        if isinstance(start, bool) or isinstance(stop, bool):
            raise TypeError
        return operator.index(start), operator.index(stop)
    except (TypeError, ValueError):
        raise ValidationError(
            f"{_label(where)}: rows must be a (start, stop) pair of integers, got {rows!r}"
        ) from None


def _check_rows(rows: Any, n: int, where: str) -> tuple[int, int]:
    parsed = _parse_rows(rows, where)
    if parsed is None:
        return 0, n
    start, stop = parsed
    if not 0 <= start <= stop <= n:
        raise ValidationError(
            f"{_label(where)}: rows=({start}, {stop}) out of range for a source of {n} rows "
            f"(need 0 <= start <= stop <= {n})"
        )
    return start, stop
