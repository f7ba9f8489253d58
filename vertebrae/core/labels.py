"""Semantic label catalog (schema ``vertebrae.semantic-label/v1``).

Every label value has a typed, collision-resistant string key. A plain string is its own key; any other type
is written ``@type:text`` (``@int:1``, ``@float:0.5``, ``@uuid:...``, ``@enum:module.Class.MEMBER``), and a
string that starts with ``@`` is escaped as ``@str:...``. So ``1``, ``"1"``, ``1.0`` and ``True`` are four
labels. A catalog orders its labels the same way whatever the input order, gives each one a unique readable
display and round-trips through JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from vertebrae.core.errors import LabelError
from vertebrae.core.fingerprint import canonical_json

SCHEMA = "vertebrae.semantic-label/v1"

#: Label types, in catalog order.
TYPES = ("bool", "int", "float", "decimal", "fraction", "str", "uuid", "date", "datetime", "time", "enum", "dataclass")

SUPPORTED = (
    "str, int, float (finite), bool, uuid.UUID, datetime.date, datetime.datetime, datetime.time, "
    "decimal.Decimal (finite), fractions.Fraction, enum.Enum members, dataclass instances with supported "
    "fields, and numpy bool/integer/floating/str scalars"
)

_REVIVE = {
    "uuid": uuid.UUID,
    "date": dt.date.fromisoformat,
    "datetime": dt.datetime.fromisoformat,
    "time": dt.time.fromisoformat,
    "decimal": Decimal,
    "fraction": Fraction,
}
_LIVE_TYPES = ("enum", "dataclass")
_CACHED = {str, int, float, bool, np.str_, np.bool_, np.int64, np.int32, np.float64, np.float32}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _unsupported(value: Any, reason: str = "") -> LabelError:
    detail = f" ({reason})" if reason else ""
    return LabelError(
        f"unsupported label {_short(value)} of type {type(value).__name__}{detail}; supported labels: {SUPPORTED}"
    )


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _identity(value: Any) -> tuple[str, Any]:
    """``(type, JSON-safe typed identity)`` of a label value; LabelError for anything unsupported."""
    v = value
    if isinstance(v, np.generic):
        if isinstance(v, np.bool_):
            v = bool(v)
        elif isinstance(v, np.integer):
            v = int(v)
        elif isinstance(v, np.floating):
            v = float(v)
        elif isinstance(v, np.str_):
            v = str(v)
    # Enums first: IntEnum / StrEnum members are also ints / strs. Base-class methods below ignore overrides in
    # subclasses (an int subclass with a custom __int__, a pandas Timestamp's isoformat).
    if isinstance(v, enum.Enum):
        if not v.name or "." in v.name:
            raise _unsupported(value, "enum member without a plain name")
        try:
            inner = semantic_key(v.value)
        except LabelError:
            inner = "@repr:" + repr(v.value)
        return "enum", {"class": _class_path(type(v)), "member": v.name, "value": inner}
    if isinstance(v, bool):
        return "bool", v
    if isinstance(v, int):
        return "int", int.__int__(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise _unsupported(value, "not finite")
        return "float", float.__float__(v) + 0.0  # -0.0 == 0.0: one label
    if isinstance(v, str):
        return "str", str.__str__(v)
    if isinstance(v, uuid.UUID):
        return "uuid", str(v)
    if isinstance(v, dt.datetime):
        return "datetime", dt.datetime.isoformat(v)
    if isinstance(v, dt.date):
        return "date", dt.date.isoformat(v)
    if isinstance(v, dt.time):
        return "time", dt.time.isoformat(v)
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise _unsupported(value, "not finite")
        return "decimal", str(v)
    if isinstance(v, Fraction):
        return "fraction", f"{v.numerator}/{v.denominator}"
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        fields = {}
        for f in sorted(dataclasses.fields(v), key=lambda f: f.name):
            if f.compare:
                item = getattr(v, f.name)
                try:
                    fields[f.name] = semantic_key(item)
                except LabelError:
                    raise _unsupported(
                        value, f"field {f.name!r} holds {_short(item)} of type {type(item).__name__}"
                    ) from None
        return "dataclass", {"class": _class_path(type(v)), "fields": fields}
    raise _unsupported(value)


def _key(kind: str, ident: Any) -> str:
    if kind == "str":
        return "@str:" + ident if ident.startswith("@") else ident
    if kind == "bool":
        return "@bool:true" if ident else "@bool:false"
    if kind == "float":
        return f"@float:{ident!r}"
    if kind == "enum":
        return f"@enum:{ident['class']}.{ident['member']}"
    if kind == "dataclass":
        return f"@dataclass:{ident['class']}:{canonical_json(ident['fields'])}"
    return f"@{kind}:{ident}"


def semantic_key(value: Any) -> str:
    """Typed key of a label value (``"a"``, ``"@int:1"``, ``"@str:@a"``...); LabelError if unsupported."""
    return _key(*_identity(value))


def _parse_key(key: Any) -> tuple[str, Any]:
    """``(type, identity)`` of a canonical key (enum identities lack ``value``); LabelError otherwise."""
    if not isinstance(key, str):
        raise LabelError(f"label key {_short(key)} is not a string")
    if not key.startswith("@"):
        return "str", key
    kind, sep, rest = key[1:].partition(":")
    try:
        if not sep or kind not in TYPES:
            raise ValueError("unknown type tag")
        if kind == "enum":
            cls, _, member = rest.rpartition(".")
            if not cls or not member:
                raise ValueError("expected module.Class.MEMBER")
            ident: Any = {"class": cls, "member": member}
        elif kind == "dataclass":
            cls, _, text = rest.partition(":")
            fields = json.loads(text)
            if not cls or not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields.values()):
                raise ValueError("expected module.Class:{field: key}")
            for field_key in fields.values():
                _parse_key(field_key)
            ident = {"class": cls, "fields": fields}
        elif kind == "str":
            ident = rest
        elif kind == "bool":
            ident = {"true": True, "false": False}[rest]
        else:
            ident = _identity({"int": int, "float": float}.get(kind, _REVIVE.get(kind))(rest))[1]
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
        raise LabelError(f"malformed label key {_short(key)}: {exc}") from None
    if _key(kind, ident) != key:
        raise LabelError(f"malformed label key {_short(key)}: not the canonical key of its value")
    return kind, ident


def describe_key(key: str) -> str:
    """Readable text of a key for messages: strings quoted (``'a'``), typed values plain (``3``, ``2024-01-02``)."""
    kind, ident = _parse_key(key)
    return repr(ident) if kind == "str" else _base_display(kind, ident)


def _base_display(kind: str, ident: Any) -> str:
    if kind in ("str", "uuid", "date", "datetime", "time", "decimal"):
        return ident
    if kind == "fraction":
        return str(Fraction(ident))
    if kind == "float":
        return repr(ident)
    if kind == "enum":
        return f"{ident['class'].rpartition('.')[2]}.{ident['member']}"
    if kind == "dataclass":
        parts = []
        for name, key in sorted(ident["fields"].items()):
            field_kind, field_ident = _parse_key(key)
            text = repr(field_ident) if field_kind == "str" else _base_display(field_kind, field_ident)
            parts.append(f"{name}={text}")
        return f"{ident['class'].rpartition('.')[2]}({', '.join(parts)})"
    return str(ident)


def _displays(items: list[tuple[str, Any, str]]) -> list[str]:
    """Unique displays of ``(type, identity, key)`` items; a text shared by entries gets ``[type]``, then ``[key]``."""
    base = [_base_display(kind, ident) for kind, ident, _ in items]
    texts, level = list(base), [0] * len(items)
    for _ in range(len(items) + 3):
        counts = Counter(texts)
        clashes = [i for i, text in enumerate(texts) if counts[text] > 1]
        if not clashes:
            return texts
        for i in clashes:
            level[i] += 1
            kind, _, key = items[i]
            suffix = kind if level[i] == 1 else key if level[i] == 2 else f"{key}] [{level[i] - 2}"
            texts[i] = f"{base[i]} [{suffix}]"
    raise LabelError(f"cannot make label displays unique: {sorted(t for t in texts if Counter(texts)[t] > 1)}")


def _order(item: tuple[str, Any, str, Any]) -> tuple:
    kind, ident, key, value = item
    nat: Any = 0
    if kind in ("bool", "int", "float", "str"):
        nat = ident
    elif kind in ("decimal", "fraction", "uuid", "date"):
        nat = _REVIVE[kind](ident)
    elif kind in ("datetime", "time"):
        t = _REVIVE[kind](ident)
        offset = t.utcoffset()
        shift = offset or dt.timedelta()
        if kind == "datetime":
            nat = (offset is not None, t.replace(tzinfo=None) - shift)
        else:
            nat = (offset is not None, dt.timedelta(hours=t.hour, minutes=t.minute, seconds=t.second,
                                                    microseconds=t.microsecond) - shift)
    elif kind == "enum":
        nat = (ident["class"], list(type(value).__members__).index(value.name))
    return TYPES.index(kind), nat, key


def _row_key(value: Any, row: int) -> str:
    try:
        return semantic_key(value)
    except LabelError as exc:
        raise LabelError(f"label at row {row}: {exc}") from None


def _keys_of(values: Any) -> tuple[np.ndarray, dict[str, tuple[int, Any]]]:
    """Object array of keys for ``values``, and the first ``(row, value)`` of each distinct key."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise LabelError(f"labels must be an iterable of label values, got {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise LabelError(f"labels must be one-dimensional, got an array of shape {values.shape}")
    first: dict[str, tuple[int, Any]] = {}
    if isinstance(values, np.ndarray) and values.dtype.kind in "biufU":
        uniq, rows, inverse = np.unique(values, return_index=True, return_inverse=True)
        keys = np.empty(len(uniq), dtype=object)
        for j in np.argsort(rows, kind="stable"):
            row = int(rows[j])
            keys[j] = _row_key(values[row], row)
            first.setdefault(keys[j], (row, values[row]))
        return keys[inverse.ravel()], first
    listed, cache = [], {}
    for row, value in enumerate(values):
        # (type, value) is a sound cache key only for these types: Decimal("1.0") == Decimal("1.00").
        memo = (type(value), value) if type(value) in _CACHED else None
        key = cache.get(memo)
        if key is None:
            key = _row_key(value, row)
            if memo is not None:
                cache[memo] = key
        listed.append(key)
        first.setdefault(key, (row, value))
    keys = np.empty(len(listed), dtype=object)
    keys[:] = listed
    return keys, first


@dataclasses.dataclass(frozen=True)
class LabelEntry:
    """One catalog label: its key, type name, JSON-safe typed identity and unique display."""

    key: str
    type: str
    value: Any
    display: str

    def __hash__(self) -> int:
        return hash((self.key, self.type, self.display))


class LabelCatalog:
    """Immutable, ordered catalog of unique labels; build it with ``from_values`` or ``from_dict``."""

    __slots__ = ("_entries", "_index", "_live")

    def __init__(self, entries: Iterable[LabelEntry] = ()) -> None:
        """Validate entries (canonical keys matching their identities, unique keys, computed displays)."""
        checked: list[tuple[str, Any, str]] = []
        given = tuple(entries)
        for i, e in enumerate(given):
            if not isinstance(e, LabelEntry):
                raise LabelError(f"catalog entry {i} is not a LabelEntry: {_short(e)}")
            kind, ident = _parse_key(e.key)
            if kind == "enum" and isinstance(e.value, dict) and isinstance(e.value.get("value"), str):
                ident = {**ident, "value": e.value["value"]}
            if kind != e.type or type(ident) is not type(e.value) or ident != e.value:
                raise LabelError(
                    f"catalog entry {i}: key {_short(e.key)} does not encode type {e.type!r} value {_short(e.value)}"
                )
            checked.append((kind, ident, e.key))
        counts = Counter(key for _, _, key in checked)
        if any(n > 1 for n in counts.values()):
            raise LabelError(f"duplicate label keys: {sorted(k for k, n in counts.items() if n > 1)}")
        for e, display in zip(given, _displays(checked)):
            if e.display != display:
                raise LabelError(f"label {e.key!r} has display {e.display!r}; expected {display!r}")
        entries = tuple(LabelEntry(key, kind, ident, e.display) for (kind, ident, key), e in zip(checked, given))
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_index", {e.key: n for n, e in enumerate(self._entries)})
        object.__setattr__(self, "_live", {})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LabelCatalog is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("LabelCatalog is immutable")

    @classmethod
    def from_values(cls, values: Iterable[Any]) -> LabelCatalog:
        """Catalog of the distinct labels in ``values``, ordered by type (see TYPES) then natural value order."""
        _, first = _keys_of(values)
        items = sorted(((*_identity(v), key, v) for key, (_, v) in first.items()), key=_order)
        displays = _displays([(kind, ident, key) for kind, ident, key, _ in items])
        catalog = cls(LabelEntry(key, kind, ident, d) for (kind, ident, key, _), d in zip(items, displays))
        object.__setattr__(catalog, "_live", {key: v for kind, _, key, v in items if kind in _LIVE_TYPES})
        return catalog

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> LabelCatalog:
        """Catalog from ``to_dict`` output; LabelError for a wrong schema or malformed or tampered entries."""
        schema = document.get("schema") if isinstance(document, Mapping) else None
        if schema != SCHEMA:
            raise LabelError(f"label catalog schema {schema!r} is not supported; expected {SCHEMA!r}")
        raw = document.get("entries")
        if not isinstance(raw, list):
            raise LabelError(f"label catalog entries must be a list, got {type(raw).__name__}")
        entries = []
        for i, item in enumerate(raw):
            if not isinstance(item, Mapping) or set(item) != {"key", "type", "value", "display"}:
                raise LabelError(f"label catalog entry {i} must have exactly key, type, value, display: {_short(item)}")
            entries.append(LabelEntry(item["key"], item["type"], item["value"], item["display"]))
        return cls(entries)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe document ``{"schema": SCHEMA, "entries": [{key, type, value, display}, ...]}``."""
        entries = [dataclasses.asdict(e) for e in self._entries]
        return {"schema": SCHEMA, "entries": entries}

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._index)

    @property
    def entries(self) -> tuple[LabelEntry, ...]:
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelCatalog) and self._entries == other._entries

    def __hash__(self) -> int:
        return hash(tuple(self._index))

    def __repr__(self) -> str:
        return f"LabelCatalog({[e.display for e in self._entries[:10]]}{' ...' if len(self) > 10 else ''})"

    def _known(self) -> str:
        shown = ", ".join(repr(e.display) for e in self._entries[:5])
        return f"known labels: {shown}{', ...' if len(self) > 5 else ''}" if self._entries else "the catalog is empty"

    def _entry(self, key: str) -> LabelEntry:
        if key not in self:
            raise LabelError(f"label key {_short(key)} is not in the catalog; {self._known()}")
        return self._entries[self._index[key]]

    def index(self, key: str) -> int:
        """Position of ``key`` in the catalog (LabelError if absent)."""
        self._entry(key)
        return self._index[key]

    def display(self, key: str) -> str:
        """Readable label, unique within the catalog."""
        return self._entry(key).display

    def value(self, key: str) -> Any:
        """Python value of ``key``; for enums and dataclasses not built in this process, their LabelEntry."""
        e = self._entry(key)
        if e.type in _LIVE_TYPES:
            return self._live.get(key, e)
        return _REVIVE[e.type](e.value) if e.type in _REVIVE else e.value

    def key_for(self, value: Any) -> str:
        """Key of a label value in the catalog; LabelError if unsupported or absent."""
        key = semantic_key(value)
        if key not in self._index:
            raise LabelError(f"label {_short(value)} (key {key!r}) is not in the catalog; {self._known()}")
        return key

    def encode(self, values: Iterable[Any]) -> np.ndarray:
        """Object array of the keys of ``values``; LabelError naming the first row whose label is absent."""
        keys, first = _keys_of(values)
        missing = [(row, value, key) for key, (row, value) in first.items() if key not in self._index]
        if missing:
            row, value, key = min(missing, key=lambda m: m[0])
            raise LabelError(
                f"label at row {row}: {_short(value)} (key {key!r}) is not in the catalog; {self._known()}"
            )
        return keys


def semantic_keys(values: Iterable[Any], name: Callable[[int], str]) -> list[str]:
    """The semantic key of each value; an unsupported value raises LabelError ``"{name(i)}: {reason}"``."""
    keys = []
    for i, value in enumerate(values):
        try:
            keys.append(semantic_key(value))
        except LabelError as exc:
            raise LabelError(f"{name(i)}: {exc}") from None
    return keys
