"""Canonical JSON and recipe fingerprints.

A fingerprint is ``sha256(canonical_json({"kind": kind, "schema": schema, "recipe": recipe}))[:16]``: a
hash of what determines an artifact's bytes, known before anything runs. Canonical JSON sorts keys, uses
compact separators, keeps non-ASCII text as UTF-8, turns tuples into lists and numpy scalars and arrays into
plain JSON values, and refuses NaN, infinities, non-string keys and objects it does not know, naming the path.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.core.numpy_types import numpy_types

#: Schema versions of every artifact and document vertebrae writes. A change here changes fingerprints.
SCHEMAS: dict[str, str] = {
    "embedding": "vertebrae.embedding/v1",
    # v2: every compression obeys the scale rule (issue 48); quantize float16 is calibrated by the reference's
    # largest |value| (code = float16(x / P)), so its stored values for ordinary data change
    "compressed": "vertebrae.compressed-embedding/v2",
    "fitted-extractor": "vertebrae.fitted-extractor/v1",
    "plan": "vertebrae.plan/v1",
    "protocol": "vertebrae.labelled-protocol/v1",
    "score": "vertebrae.score/v1",
    "report": "vertebrae.report/v1",
    "comparison": "vertebrae.comparison-artifact/v1",
    "retrieval-partial": "vertebrae.retrieval-partial/v2",
    "embedding-sweep": "vertebrae.embedding-sweep/v1",  # a folder of layer shards (names a layer sweep job)
    "retrieval-fanout": "vertebrae.retrieval-fanout/v3",
    "labelled-partial": "vertebrae.labelled-partial/v1",
    "views": "vertebrae.views/v1",  # a labelled benchmark's views report (planning.views)
}

FINGERPRINT_LENGTH = 16
#: a fingerprint as it appears in a file or folder name (``fullmatch`` it)
FINGERPRINT_PATTERN = re.compile(f"[0-9a-f]{{{FINGERPRINT_LENGTH}}}")


class _NotPlain(Exception):
    """Raised by ``_plain`` for a value it does not convert; ``to_json_value`` then redoes the walk with paths."""


def _plain(obj: Any) -> Any:
    """``to_json_value`` for plain data (exact str, int, bool, None, finite float; dicts with str keys; lists and
    tuples of those), without building JSON paths; _NotPlain on anything else."""
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:
        return obj
    if kind is float:
        if not math.isfinite(obj):
            raise _NotPlain
        return obj
    if kind is dict:
        out = {}
        for key, value in obj.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain(value)
        return out
    if kind is list or kind is tuple:
        return [_plain(value) for value in obj]
    raise _NotPlain


def to_json_value(obj: Any, path: str = "$") -> Any:
    """Return ``obj`` as plain JSON data (dict, list, str, int, float, bool, None).

    numpy scalars become Python scalars, numpy arrays nested lists, tuples lists. Floats must be finite.
    Raises ValidationError naming the JSON path of the offending value.
    """
    try:
        return _plain(obj)  # the common case, without the paths only an error message needs
    except (_NotPlain, RecursionError):  # RecursionError: data holding itself, or nested past Python's limit
        return _to_json_value(obj, path, ())


_MAX_DEPTH = 200  # nesting levels of recipe data (configs, params); deeper is refused, not a RecursionError


def _to_json_value(obj: Any, path: str, within: tuple[int, ...] = ()) -> Any:
    np = numpy_types()  # numpy values exist only once numpy is loaded: planning runs without it
    if isinstance(obj, (Mapping, list, tuple, np.ndarray)):
        if id(obj) in within:
            raise ValidationError(f"the value at {path} contains itself (a reference cycle) and cannot be written as "
                                  "canonical JSON")
        if len(within) >= _MAX_DEPTH:
            raise ValidationError(f"the value at {path} is nested more than {_MAX_DEPTH} levels deep and cannot be "
                                  "written as canonical JSON")
        within = (*within, id(obj))
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, str):
        return str.__str__(obj)  # plain str, also for np.str_ and other str subclasses
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if not math.isfinite(value):
            raise ValidationError(f"non-finite number {value!r} at {path} cannot be written as canonical JSON")
        return value
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufU":
            raise ValidationError(f"array of dtype {obj.dtype} at {path} cannot be written as canonical JSON")
        return _to_json_value(obj.tolist(), path, within)
    if isinstance(obj, Mapping):
        out = {}
        for key, value in obj.items():
            if isinstance(key, np.str_):
                key = str(key)
            if not isinstance(key, str):
                raise ValidationError(f"non-string key {key!r} at {path} cannot be written as canonical JSON")
            out[key] = _to_json_value(value, f"{path}.{key}", within)
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_json_value(value, f"{path}[{i}]", within) for i, value in enumerate(obj)]
    raise ValidationError(f"object of type {type(obj).__name__} at {path} cannot be written as canonical JSON")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text of ``obj`` (sorted keys, compact, UTF-8, finite numbers only)."""
    return json.dumps(
        to_json_value(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(data: bytes | str) -> str:
    """Hex SHA-256 of bytes, or of text encoded as UTF-8."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def fingerprint(kind: str, recipe: Any) -> str:
    """16-hex-digit fingerprint of a recipe for an artifact of ``kind`` (a key of SCHEMAS)."""
    if kind not in SCHEMAS:
        raise ValidationError(f"unknown artifact kind {kind!r}; known kinds: {sorted(SCHEMAS)}")
    document = {"kind": kind, "schema": SCHEMAS[kind], "recipe": recipe}
    return sha256_hex(canonical_json(document))[:FINGERPRINT_LENGTH]
