"""MemoryConfig: how much of an endpoint's embeddings may stay resident while it is being embedded.

Embedding is streamed batch by batch into an EmbeddingAccumulator. Past ``max_resident_bytes`` the rows
either spill to a temporary local file (``allow_disk_spill=True``: a numpy memmap under ``spill_dir``, removed
when the array is garbage-collected) or the run fails with a BudgetError before the full endpoint is
accumulated. Sparse outputs cannot spill (they are refused past the budget).
"""

from __future__ import annotations

import os
import tempfile
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import stack_blocks
from vertebrae.core.errors import BudgetError, ValidationError


@dataclass(frozen=True)
class MemoryConfig:
    """Resident budget of endpoint materialisation (None = unbounded) and what to do past it."""

    max_resident_bytes: int | None = None
    allow_disk_spill: bool = False
    spill_dir: str | None = None

    def __post_init__(self) -> None:
        value = self.max_resident_bytes
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValidationError(f"MemoryConfig.max_resident_bytes must be a positive integer or None, got {value!r}")
        if not isinstance(self.allow_disk_spill, bool):
            raise ValidationError(f"MemoryConfig.allow_disk_spill must be a bool, got {self.allow_disk_spill!r}")


def resident_bytes(matrix: Any) -> int:
    if sp.issparse(matrix):
        return int(matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes)
    return 0 if isinstance(matrix, np.memmap) else int(matrix.nbytes)


class EmbeddingAccumulator:
    """Collects an endpoint's embedding batches in row order under a MemoryConfig."""

    def __init__(self, n_rows: int, memory: MemoryConfig | None, *, endpoint: str) -> None:
        self.n_rows, self.memory, self.endpoint = n_rows, memory or MemoryConfig(), endpoint
        self.parts: list[Any] = []
        self.filled = 0
        self.spilled: np.memmap | None = None

    def add(self, block: Any) -> None:
        if self.spilled is not None:
            self._write(block)
            return
        self.parts.append(block)
        self.filled += block.shape[0]
        budget = self.memory.max_resident_bytes
        if budget is None or sum(resident_bytes(p) for p in self.parts) <= budget:
            return
        if not self.memory.allow_disk_spill or sp.issparse(block):
            what = "sparse embeddings cannot spill to disk" if sp.issparse(block) else "set allow_disk_spill=True"
            raise BudgetError(
                f"endpoint {self.endpoint!r}: embeddings exceed MemoryConfig.max_resident_bytes={budget} after "
                f"{self.filled} of {self.n_rows} rows; raise the budget or {what}"
            )
        self._spill()

    def _spill(self) -> None:
        width, dtype = self.parts[0].shape[1], np.result_type(*[p.dtype for p in self.parts])
        handle, path = tempfile.mkstemp(prefix=f"vertebrae-{self.endpoint}-", suffix=".f", dir=self.memory.spill_dir)
        os.close(handle)
        self.spilled = np.memmap(path, dtype=dtype, mode="w+", shape=(self.n_rows, width))
        weakref.finalize(self.spilled, os.unlink, path)
        parts, self.parts, self.filled = self.parts, [], 0
        for part in parts:
            self._write(part)

    def _write(self, block: Any) -> None:
        self.spilled[self.filled:self.filled + block.shape[0]] = block
        self.filled += block.shape[0]

    def result(self) -> Any:
        if self.spilled is not None:
            self.spilled.flush()
            return self.spilled
        return stack_blocks(self.parts, self.endpoint)
