"""RawInputs: rows of raw, non-numeric inputs (texts or image file paths) that a model extractor encodes.

It behaves like a 1-D array where the stages need one: ``shape == (n,)``, ``len``, slicing and integer / boolean
index arrays return RawInputs of the selected rows (ids kept alongside), so datasets, shards and batches cut it
like a matrix. ``ids`` are the rows' ids as declared (for messages naming the row).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.core.image_refs import describe, read_image_bytes

KINDS = ("text", "image")


@dataclass(frozen=True, eq=False)
class RawInputs:
    """``kind`` "text" (values are the texts) or "image" (values are absolute image file paths)."""

    kind: str
    values: tuple[str, ...]
    ids: tuple[Any, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValidationError(f"RawInputs.kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "ids", tuple(self.ids))
        if len(self.values) != len(self.ids):
            raise ValidationError(f"RawInputs: {len(self.values)} values for {len(self.ids)} ids")
        for i, value in enumerate(self.values):
            if not isinstance(value, str):
                raise ValidationError(f"RawInputs: row {self.ids[i]!r} holds {type(value).__name__}, expected str")

    @classmethod
    def texts(cls, values: Sequence[str], ids: Sequence[Any] | None = None) -> RawInputs:
        values = tuple(values)
        return cls("text", values, tuple(range(len(values))) if ids is None else tuple(ids))

    @classmethod
    def images(cls, paths: Sequence[str], ids: Sequence[Any] | None = None) -> RawInputs:
        paths = tuple(str(p) for p in paths)
        return cls("image", paths, tuple(range(len(paths))) if ids is None else tuple(ids))

    @property
    def shape(self) -> tuple[int]:
        return (len(self.values),)

    @property
    def ndim(self) -> int:
        return 1

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)):
            return self.values[key]
        if isinstance(key, slice):
            return RawInputs(self.kind, self.values[key], self.ids[key])
        index = np.asarray(key)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        if index.dtype.kind not in "iu" or index.ndim != 1:
            raise ValidationError(f"RawInputs cannot be indexed by {key!r}")
        return RawInputs(self.kind, tuple(self.values[i] for i in index), tuple(self.ids[i] for i in index))

    def tolist(self) -> list[str]:
        return list(self.values)

    def digest(self) -> str:
        """SHA-256 of the kind and every row: the text, or the bytes of the image file."""
        digest = hashlib.sha256(f"vertebrae.raw-inputs/v1|{self.kind}|{len(self)}|".encode())
        for rid, value in zip(self.ids, self.values):
            if self.kind == "text":
                data = value.encode("utf-8")
            else:
                try:
                    data = read_image_bytes(value)
                except OSError as exc:
                    raise ValidationError(f"row {rid!r}: cannot read image {describe(value)}: {exc}") from None
            digest.update(f"{len(data)}|".encode())
            digest.update(hashlib.sha256(data).digest())
        return digest.hexdigest()
