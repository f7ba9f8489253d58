"""MemoryConfig: streamed endpoint accumulation that spills to disk or refuses before holding the endpoint."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import BudgetError, ValidationError
from vertebrae.core.memory import MemoryConfig
from vertebrae.core.arrays import encode_row_ids
from vertebrae.extractors.callable import CallableExtractor
from vertebrae.stages.common import embed_endpoint

ROWS = 1000
X = np.random.default_rng(0).normal(size=(ROWS, 16))
IDS = encode_row_ids(None, ROWS, what="test")


class Counting:
    def __init__(self):
        self.rows = 0

    def __call__(self, batch):
        self.rows += batch.shape[0]
        return batch * 2.0


def test_unbounded_and_spilled_embeddings_are_identical_and_the_spill_is_a_memmap(tmp_path):
    plain = embed_endpoint(CallableExtractor("x2", Counting(), cache_identity="x2"), X, IDS, shards=3, batch_size=64, endpoint="gallery")
    budget = MemoryConfig(max_resident_bytes=20_000, allow_disk_spill=True, spill_dir=str(tmp_path))
    spilled = embed_endpoint(CallableExtractor("x2", Counting(), cache_identity="x2"), X, IDS, shards=3, batch_size=64,
                             endpoint="gallery", memory=budget)
    assert isinstance(spilled.matrix, np.memmap) and not isinstance(plain.matrix, np.memmap)
    np.testing.assert_array_equal(np.asarray(spilled.matrix), plain.matrix)
    np.testing.assert_array_equal(plain.matrix, X * 2.0)
    assert len(list(tmp_path.iterdir())) == 1  # the staging file lives in spill_dir


def test_without_spill_the_run_stops_before_accumulating_the_endpoint():
    counting = Counting()
    budget = MemoryConfig(max_resident_bytes=20_000, allow_disk_spill=False)
    with pytest.raises(BudgetError, match="max_resident_bytes=20000") as info:
        embed_endpoint(CallableExtractor("x2", counting, cache_identity="x2"), X, IDS, shards=1, batch_size=64,
                       endpoint="gallery", memory=budget)
    assert "'gallery'" in str(info.value) and isinstance(info.value, MemoryError)
    # 20,000 bytes hold 156 rows of 16 float64: the third batch of 64 rows crosses the budget
    assert counting.rows == 192 < ROWS


def test_within_budget_nothing_spills(tmp_path):
    budget = MemoryConfig(max_resident_bytes=10**9, allow_disk_spill=True, spill_dir=str(tmp_path))
    block = embed_endpoint(CallableExtractor("x2", Counting(), cache_identity="x2"), X, IDS, shards=2, batch_size=100,
                           endpoint="query", memory=budget)
    assert not isinstance(block.matrix, np.memmap) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs", [{"max_resident_bytes": 0}, {"max_resident_bytes": 1.5}, {"allow_disk_spill": "yes"}])
def test_config_validation_names_the_field(kwargs):
    with pytest.raises(ValidationError, match="MemoryConfig"):
        MemoryConfig(**kwargs)
