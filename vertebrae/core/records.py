"""Strict records: the checks every frozen config dataclass shares.

Each check takes the value, the ``owner`` (the class name shown in messages), the field ``name`` and the
``error`` type to raise (:class:`ConfigError` unless the class raises plain :class:`ValidationError`); messages
read ``"<owner>.<name> must be ..., got <value!r>"``. Integers and reals exclude ``bool`` and ``numpy.bool_``
and include numpy scalars; checked values are returned as plain ``int`` / ``float``.

- ``record_fields(cls, data, *, error)`` -> ``dict(data)``, once ``data`` is a mapping (else
  ``"<Class> must be a mapping, got <type>"``) whose keys are all dataclass fields of ``cls`` (else
  ``"unknown <Class> fields: [<sorted keys>]"``). A ``from_dict`` that needs to adjust the values (decode
  labels, ...) starts from this dict.
- ``from_record(cls, data, *, error, tuples=())`` -> ``cls(**record_fields(cls, data, error=error))`` with the
  fields named in ``tuples`` turned from lists back into tuples (JSON has no tuple).
- ``is_int(value)``, ``is_real(value)``: type tests only.
- ``check_bool`` -> the value, a ``bool``: ``"must be a bool"``.
- ``one_of(value, choices, ...)`` -> the value: ``"must be one of <choices>"``.
- ``positive_int(..., optional=False)`` -> ``int`` >= 1 (None passes through when ``optional``):
  ``"must be a positive integer"`` (``"... or None"`` when optional).
- ``non_negative_int`` -> ``int`` >= 0: ``"must be a non-negative integer"``.
- ``probability`` -> ``float`` in [0, 1]: ``"must be a number in [0, 1]"`` (a number out of range is shown as
  a float).
- ``cutoffs(values, ...)`` -> the sorted tuple of distinct positive integers (rank cutoffs such as top-k):
  ``"must be a non-empty sequence of positive integers"``, then ``positive_int`` on each, then
  ``"<owner>.<name> holds duplicates: [...]"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from vertebrae.core.errors import ConfigError
from vertebrae.core.numpy_types import numpy_types

__all__ = ["check_bool", "cutoffs", "from_record", "is_int", "is_real", "non_negative_int", "one_of",
           "positive_int", "probability", "record_fields"]

T = TypeVar("T")


def record_fields(cls: type, data: Any, *, error: type[Exception] = ConfigError) -> dict[str, Any]:
    """``dict(data)`` after refusing a non-mapping and any key that is not a dataclass field of ``cls``."""
    if not isinstance(data, Mapping):
        raise error(f"{cls.__name__} must be a mapping, got {type(data).__name__}")
    unknown = set(data) - set(cls.__dataclass_fields__)
    if unknown:
        raise error(f"unknown {cls.__name__} fields: {sorted(map(str, unknown))}")
    return dict(data)


def from_record(cls: type[T], data: Any, *, error: type[Exception] = ConfigError, tuples: Iterable[str] = ()) -> T:
    """``cls(**fields)`` from a strict mapping; the fields named in ``tuples`` become tuples when given as lists."""
    values = record_fields(cls, data, error=error)
    for name in tuples:
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    return cls(**values)


def is_int(value: Any) -> bool:
    """An integer (Python or numpy), not a bool."""
    np = numpy_types()
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """A real number (Python or numpy int/float), not a bool."""
    np = numpy_types()
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_bool(value: Any, owner: str, name: str, *, error: type[Exception] = ConfigError) -> bool:
    """``value`` when it is a Python ``bool``."""
    if not isinstance(value, bool):
        raise error(f"{owner}.{name} must be a bool, got {value!r}")
    return value


def one_of(value: Any, choices: Sequence[Any], owner: str, name: str, *, error: type[Exception] = ConfigError) -> Any:
    """``value`` when it is one of ``choices``."""
    if value not in choices:
        raise error(f"{owner}.{name} must be one of {choices}, got {value!r}")
    return value


def positive_int(value: Any, owner: str, name: str, *, error: type[Exception] = ConfigError,
                 optional: bool = False) -> int | None:
    """``int(value)`` for an integer >= 1; None passes through when ``optional``."""
    if optional and value is None:
        return None
    if not is_int(value) or value < 1:
        suffix = " or None" if optional else ""
        raise error(f"{owner}.{name} must be a positive integer{suffix}, got {value!r}")
    return int(value)


def non_negative_int(value: Any, owner: str, name: str, *, error: type[Exception] = ConfigError) -> int:
    """``int(value)`` for an integer >= 0."""
    if not is_int(value) or value < 0:
        raise error(f"{owner}.{name} must be a non-negative integer, got {value!r}")
    return int(value)


#: Seeds reach scikit-learn's random_state and NumPy's legacy seeding, which take 0 .. 2**32 - 1
MAX_SEED = 2 ** 32 - 1


def seed_int(value: Any, owner: str, name: str, *, error: type[Exception] = ConfigError) -> int:
    """``int(value)`` for a seed: an integer in 0 .. MAX_SEED (a larger one fails deep in a job)."""
    if not is_int(value) or not 0 <= value <= MAX_SEED:
        raise error(f"{owner}.{name} must be a non-negative integer, at most {MAX_SEED} (2**32 - 1), got {value!r}")
    return int(value)


def bounded_int(value: Any, owner: str, name: str, low: int, high: int, why: str, *,
                error: type[Exception] = ConfigError) -> int:
    """``int(value)`` for an integer in ``low .. high``; ``why`` says what the upper bound protects."""
    if not is_int(value) or not low <= value <= high:
        raise error(f"{owner}.{name} must be an integer from {low:,} to {high:,} ({why}), got {value!r}")
    return int(value)


def probability(value: Any, owner: str, name: str, *, error: type[Exception] = ConfigError) -> float:
    """``float(value)`` for a finite number in [0, 1]."""
    if not is_real(value):
        raise error(f"{owner}.{name} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise error(f"{owner}.{name} must be a number in [0, 1], got {value!r}")
    return value


def cutoffs(values: Any, owner: str, name: str, *, error: type[Exception] = ConfigError) -> tuple[int, ...]:
    """The sorted tuple of a non-empty sequence of distinct positive integers."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, numpy_types().ndarray)) or not len(values):
        raise error(f"{owner}.{name} must be a non-empty sequence of positive integers, got {values!r}")
    for k in values:
        if not is_int(k) or k < 1:
            raise error(f"{owner}.{name} must hold positive integers, got {k!r}")
    ks = tuple(int(k) for k in values)
    if len(set(ks)) != len(ks):
        raise error(f"{owner}.{name} holds duplicates: {list(ks)}")
    return tuple(sorted(ks))
