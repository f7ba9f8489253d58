"""A declared train / val / test split read from a file (issue 49): a labelled metric's ``split: {path: FILE}`` in a
config, ``vertebrae.read_split(FILE)`` in Python.

By the file's suffix:

- ``.csv`` / ``.tsv``: a header row, then a row per dataset row with an id column (``id_column``, default ``id``)
  and a split column (``split_column``, default ``split``) holding ``train``, ``val`` or ``test`` (surrounding spaces
  ignored; other columns ignored). Read as the mapping ``{train: [ids], val: [ids], test: [ids]}`` in file order
  (``val`` only where the file has val rows): dataset rows the file does not list are in no part, left out as an
  inline mapping leaves them out.
- ``.json``: a mapping ``{train: [ids], val: [ids], test: [ids]}`` (string or integer ids), or a list of
  train/val/test in row order: the inline forms of ``split``, from a file.

Ids: a CSV holds text; with the dataset's row ids (``row_ids``), a text id that names an integer row id (the
dataset's ids are integers, or it has none: rows are numbered from 0) is read as that integer, and an id the dataset
lacks is refused naming a few, with their lines. Refusals are ``ValidationError`` naming the file (and the line,
the column or the part). A config's split file is read when the workflow is planned (``with_split_files``): its
content becomes the metric's ``split`` in its recipe, so the fingerprint follows the file's content, the same split
inline and from a file give the same recipe, and no job reads the file.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.labels import semantic_key

SPLIT_VALUES = ("train", "val", "test")
#: the keys of a ``split`` that names a file
FILE_KEYS = ("path", "id_column", "split_column")
DELIMITERS = {".csv": ",", ".tsv": "\t"}
SUFFIXES = (*DELIMITERS, ".json")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def read_split(path: str | Path, *, id_column: str | None = None, split_column: str | None = None,
               row_ids: Sequence[Any] | None = None) -> dict[str, list[Any]] | list[str]:
    """The declared split in ``path`` (a ``.csv``/``.tsv`` table of ids and train/val/test, or a ``.json`` mapping
    or list), as ``KNNMetric(split=...)`` and the other built-in labelled metrics take it. ``id_column`` /
    ``split_column``: the table's columns (default ``id`` and ``split``). ``row_ids``: the dataset's row ids (e.g.
    ``dataset.row_ids``): text ids are then typed like them and ids the dataset lacks are refused. ValidationError
    naming the file and the line for a bad file; rows of the dataset the file does not list are in no part."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValidationError(f"{path}: a split file is a .csv, .tsv or .json file, got {path.suffix or 'no suffix'!r}")
    if not path.is_file():
        raise ValidationError(f"{path}: file not found")
    keys = None if row_ids is None else _row_keys(row_ids)
    if suffix == ".json":
        if id_column is not None or split_column is not None:
            raise ValidationError(f"{path}: id_column and split_column apply to a .csv or .tsv table, not to JSON")
        return _read_json(path, keys)
    return _read_table(path, DELIMITERS[suffix], id_column or "id", split_column or "split", keys)


def _row_keys(row_ids: Sequence[Any]) -> set[str]:
    values = row_ids.tolist() if hasattr(row_ids, "tolist") else list(row_ids)
    return {v if isinstance(v, str) else semantic_key(v) for v in values}


def _typed(value: Any, keys: set[str] | None) -> Any:
    """A text id that is no row key but names an integer row id, as that integer; any other id as it is."""
    if keys is not None and isinstance(value, str) and value not in keys and _INTEGER.fullmatch(value) \
            and semantic_key(int(value)) in keys:
        return int(value)
    return value


def _key(value: Any) -> str:
    return value if isinstance(value, str) else semantic_key(value)


def _read_table(path: Path, delimiter: str, id_column: str, split_column: str,
                keys: set[str] | None) -> dict[str, list[Any]]:
    parts: dict[str, list[Any]] = {part: [] for part in SPLIT_VALUES}
    seen: dict[str, int] = {}
    absent: list[tuple[Any, int]] = []
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            header = None
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [cell.strip() for cell in row]
                    columns = []
                    for name, key in ((id_column, "id_column"), (split_column, "split_column")):
                        if name not in header:
                            raise ValidationError(f"{path}: no column {name!r} (key {key!r}); the header's columns are "
                                                  f"{header}")
                        columns.append(header.index(name))
                    continue
                line = reader.line_num
                if len(row) <= max(columns):
                    raise ValidationError(f"{path}: line {line}: {len(row)} fields, fewer than the header's "
                                          f"{len(header)}")
                ident, value = row[columns[0]].strip(), row[columns[1]].strip()
                if not ident:
                    raise ValidationError(f"{path}: line {line}: column {id_column!r} is empty")
                if value not in SPLIT_VALUES:
                    raise ValidationError(f"{path}: line {line}: column {split_column!r} holds {value!r} (row "
                                          f"{ident!r}); the split values are train, val and test")
                if ident in seen:
                    raise ValidationError(f"{path}: lines {seen[ident]} and {line} both name row {ident!r}")
                seen[ident] = line
                typed = _typed(ident, keys)
                if keys is not None and _key(typed) not in keys:
                    absent.append((ident, line))
                parts[value].append(typed)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"{path}: cannot read it as a {'TSV' if delimiter == chr(9) else 'CSV'} table "
                              f"({exc})") from None
    if header is None:
        raise ValidationError(f"{path}: empty: expected a header row naming columns {id_column!r} and "
                              f"{split_column!r}, then one row per dataset row")
    _refuse_absent(path, [f"{ident!r} (line {line})" for ident, line in absent])
    return _checked(path, parts)


def _read_json(path: Path, keys: set[str] | None) -> dict[str, list[Any]] | list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(f"{path}: cannot read it as JSON ({exc})") from None
    if isinstance(data, list):
        bad = [(i, v) for i, v in enumerate(data) if v not in SPLIT_VALUES]
        if bad:
            raise ValidationError(f"{path}: item [{bad[0][0]}] is {bad[0][1]!r}: a list gives train, val or test per "
                                  f"row, in row order ({len(bad)} such item(s))")
        if keys is not None and len(data) != len(keys):
            raise ValidationError(f"{path}: a list of {len(data)} values for {len(keys)} dataset rows (a list gives one "
                                  "per row, in row order; a mapping of ids leaves rows out)")
        return list(data)
    if not isinstance(data, Mapping):
        raise ValidationError(f"{path}: expected a mapping {{train: [ids], val: [ids], test: [ids]}} or a list of "
                              f"train/val/test in row order, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in SPLIT_VALUES)
    if unknown:
        raise ValidationError(f"{path}: keys {unknown}: a split mapping holds only train, val and test")
    parts: dict[str, list[Any]] = {part: [] for part in SPLIT_VALUES}
    seen: dict[str, str] = {}
    absent = []
    for part in SPLIT_VALUES:
        ids = data.get(part, [])
        if not isinstance(ids, list):
            raise ValidationError(f"{path}: {part!r} must be a list of row ids, got {type(ids).__name__}")
        for i, ident in enumerate(ids):
            where = f"{part}[{i}]"
            if isinstance(ident, bool) or not isinstance(ident, (str, int)):
                raise ValidationError(f"{path}: {where} is {ident!r}: a row id is a string or an integer")
            typed = _typed(ident, keys)
            key = _key(typed)
            if key in seen:
                raise ValidationError(f"{path}: {seen[key]} and {where} both name row {ident!r}")
            seen[key] = where
            if keys is not None and key not in keys:
                absent.append(f"{ident!r} ({where})")
            parts[part].append(typed)
    _refuse_absent(path, absent)
    out = _checked(path, parts)
    if "val" in data and "val" not in out:
        raise ValidationError(f"{path}: 'val' is an empty list: give the validation rows' ids, or leave the key out")
    return out


def _refuse_absent(path: Path, absent: list[str]) -> None:
    if absent:
        raise ValidationError(f"{path}: {len(absent)} id(s) name no row of the dataset: {', '.join(absent[:5])}"
                              f"{', ...' if len(absent) > 5 else ''}")


def _checked(path: Path, parts: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The mapping (``val`` only where it has rows: a train/test split keeps the inline form's recipe); a file
    without train rows, or without test or val rows, refused."""
    if not parts["train"] or not (parts["test"] or parts["val"]):
        counts = ", ".join(f"{len(parts[p])} {p}" for p in SPLIT_VALUES)
        raise ValidationError(f"{path}: a split needs train rows and test (or val) rows; the file has {counts}")
    return {part: ids for part, ids in parts.items() if ids or part == "test"}


def with_split_files(bench: Mapping[str, Any], *, base_dir: Path, where: str,
                     row_ids: Callable[[], Sequence[Any]]) -> Mapping[str, Any]:
    """A labelled benchmark declaration whose metrics' ``split: {path: FILE, ...}`` are read (``read_split``, the
    path relative to ``base_dir`` as every data path of the config), ``bench`` itself where none names a file.
    ``row_ids()``: the dataset's row ids, asked for only when a file is read. ConfigError naming
    ``<where>.metrics[i].split`` (``.path``) and the file."""
    metrics = list(bench.get("metrics") or ())
    named = [i for i, entry in enumerate(metrics) if isinstance(entry, Mapping)
             and isinstance(entry.get("split"), Mapping) and "path" in entry["split"]]
    if not named:
        return bench
    ids = row_ids()
    for i in named:
        decl, key = metrics[i]["split"], f"{where}.metrics[{i}].split"
        unknown = sorted(str(k) for k in decl if k not in FILE_KEYS)
        if unknown:
            raise ConfigError(f"{key}: keys {unknown} beside 'path': a split is either a file ({{path, id_column, "
                              "split_column}}) or the ids inline ({train: [...], val: [...], test: [...]})")
        for column in ("id_column", "split_column"):
            if column in decl and (not isinstance(decl[column], str) or not decl[column]):
                raise ConfigError(f"{key}.{column}: a column name, got {decl[column]!r}")
        raw = decl["path"]
        if not isinstance(raw, str) or not raw:
            raise ConfigError(f"{key}.path: a file path, got {raw!r}")
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"{key}.path: file not found: {path}")
        try:
            split = read_split(path, id_column=decl.get("id_column"), split_column=decl.get("split_column"),
                               row_ids=ids)
        except ValidationError as exc:
            raise ConfigError(f"{key}.path: {exc}") from None
        metrics[i] = {**metrics[i], "split": split}
    return {**bench, "metrics": metrics}


__all__ = ["FILE_KEYS", "SPLIT_VALUES", "read_split", "with_split_files"]
