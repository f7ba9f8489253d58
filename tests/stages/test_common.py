"""Protocol-independent stages: shard bounds, batched embedding, merging shards, the in-process twin."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.precomputed import PrecomputedExtractor
from vertebrae.stages.common import (
    EmbeddingBlock, batch_ranges, embed_endpoint, embed_rows, merge_blocks, shard_bounds, shard_segments,
)


class RecordingExtractor(Extractor):
    """Applies ``fn`` to each batch and records the batch sizes it was called with."""

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn
        self.batch_sizes = []

    def recipe(self):
        return {"type": "test-recording"}

    def transform(self, inputs):
        self.batch_sizes.append(inputs.shape[0])
        return self.fn(inputs)


def ids(n, prefix="r"):
    return tuple(f"{prefix}{i}" for i in range(n))


# -- shard_bounds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_rows", "requested", "batch_size", "expected"),
    [
        (10, 3, 1, [(0, 3), (3, 6), (6, 10)]),  # batches of 1: edges 10*i//3 = 0, 3, 6, 10
        (7, 2, 1, [(0, 3), (3, 7)]),
        (8, 4, 2, [(0, 2), (2, 4), (4, 6), (6, 8)]),
        (1797, 2, 256, [(0, 1024), (1024, 1797)]),  # 8 batches, the last one short: edges 256 * (8i // 2), capped
        (1797, 4, 256, [(0, 512), (512, 1024), (1024, 1536), (1536, 1797)]),
        (1797, 3, 256, [(0, 512), (512, 1280), (1280, 1797)]),  # 8*i//3 = 0, 2, 5, 8 batches
        (5, 1, 2, [(0, 5)]),
        (10, 5, 4, [(0, 4), (4, 8), (8, 10)]),  # capped at the batch count, 3
        (3, 5, 1, [(0, 1), (1, 2), (2, 3)]),
        (1, 8, 64, [(0, 1)]),
    ],
)
def test_shard_bounds_hand_worked(n_rows, requested, batch_size, expected):
    assert shard_bounds(n_rows, requested, batch_size=batch_size) == expected


@pytest.mark.parametrize("n_rows", [2, 9, 100, 101, 1797])
@pytest.mark.parametrize("requested", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("batch_size", [1, 4, 256])
def test_shard_bounds_are_contiguous_batch_aligned_and_cover_every_row(n_rows, requested, batch_size):
    bounds = shard_bounds(n_rows, requested, batch_size=batch_size)
    batches = -(-n_rows // batch_size)
    assert len(bounds) == min(batches, requested)
    assert bounds[0][0] == 0 and bounds[-1][1] == n_rows
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(a % batch_size == 0 for a, _ in bounds)  # every shard starts on a batch edge
    whole = [-(-(b - a) // batch_size) for a, b in bounds]  # batches per shard
    assert min(whole) >= 1 and max(whole) - min(whole) <= 1


@pytest.mark.parametrize("requested", [0, -2, 2.0, "2", True, None])
def test_shard_bounds_refuses_invalid_shard_counts(requested):
    with pytest.raises(ValidationError, match="shard count must be a positive integer"):
        shard_bounds(10, requested, batch_size=2)


@pytest.mark.parametrize("batch_size", [0, -1, 2.0, True, None])
def test_shard_bounds_refuses_invalid_batch_sizes(batch_size):
    with pytest.raises(ValidationError, match="batch_size must be a positive integer"):
        shard_bounds(10, 2, batch_size=batch_size)


def test_shard_bounds_refuses_an_empty_endpoint():
    with pytest.raises(ValidationError, match="at least one row"):
        shard_bounds(0, 2, batch_size=4)


# -- embed_rows -----------------------------------------------------------------------------------------


def test_embed_rows_calls_the_extractor_in_batches_and_keeps_row_order():
    inputs = np.arange(20, dtype=np.float64).reshape(10, 2)
    extractor = RecordingExtractor("doubler", lambda x: 2 * x)
    block = embed_rows(extractor, inputs, ids(10), batch_size=4, endpoint="samples")
    assert extractor.batch_sizes == [4, 4, 2]
    np.testing.assert_array_equal(block.matrix, 2 * inputs)
    assert block.row_ids == ids(10)
    assert block.metadata() == {"n_rows": 10, "dim": 2, "dtype": "float64", "sparse": False}


def test_embed_rows_with_a_batch_larger_than_the_rows_makes_one_call():
    inputs = np.ones((3, 2), dtype=np.float32)
    extractor = RecordingExtractor("one", lambda x: x)
    block = embed_rows(extractor, inputs, ids(3), batch_size=256, endpoint="samples")
    assert extractor.batch_sizes == [3]
    assert block.matrix.dtype == np.float32


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True])
def test_embed_rows_refuses_invalid_batch_size(batch_size):
    extractor = RecordingExtractor("x", lambda x: x)
    with pytest.raises(ValidationError, match="batch_size"):
        embed_rows(extractor, np.ones((3, 2)), ids(3), batch_size=batch_size, endpoint="samples")
    assert extractor.batch_sizes == []


def test_embed_rows_refuses_row_ids_of_the_wrong_length():
    with pytest.raises(ValidationError, match=r"endpoint 'samples': 2 row ids for 3 rows"):
        embed_rows(RecordingExtractor("x", lambda x: x), np.ones((3, 2)), ids(2), batch_size=2, endpoint="samples")


def test_embed_rows_refuses_an_extractor_returning_the_wrong_number_of_rows():
    calls = []

    def drop_a_row_on_second_call(x):
        calls.append(1)
        return x[:-1] if len(calls) == 2 else x

    extractor = RecordingExtractor("shrinker", drop_a_row_on_second_call)
    with pytest.raises(ValidationError) as info:
        embed_rows(extractor, np.ones((10, 2)), ids(10), batch_size=4, endpoint="samples")
    message = str(info.value)
    assert "'shrinker'" in message
    assert "returned 3 rows for a batch of 4" in message
    assert "rows 4..7" in message  # the second batch
    assert "'samples'" in message


def test_embed_rows_refuses_nan_outputs_naming_endpoint_and_row_id():
    def poison_row_six(x):
        out = x.astype(np.float64).copy()
        out[x[:, 0] == 6] = np.nan
        return out

    inputs = np.arange(10, dtype=np.float64).reshape(10, 1) * np.ones((1, 3))
    with pytest.raises(ValidationError) as info:
        embed_rows(RecordingExtractor("nanny", poison_row_six), inputs, ids(10), batch_size=4, endpoint="gallery")
    message = str(info.value)
    assert "'gallery'" in message
    assert "'nanny'" in message
    assert "'r6'" in message
    assert "'r5'" not in message and "'r7'" not in message


def test_embed_rows_refuses_infinite_sparse_outputs():
    def poison(x):
        out = sp.csr_matrix(x)
        out.data[out.data == 4] = np.inf
        return out

    inputs = np.diag(np.arange(1.0, 6.0))  # row 3 holds the value 4
    with pytest.raises(ValidationError, match=r"'r3'"):
        embed_rows(RecordingExtractor("sparse-inf", poison), inputs, ids(5), batch_size=2, endpoint="samples")


def test_embed_rows_stacks_sparse_batches_as_csr():
    inputs = np.zeros((7, 5))
    inputs[np.arange(7), np.arange(7) % 5] = np.arange(1.0, 8.0)
    extractor = RecordingExtractor("sparse", lambda x: sp.coo_matrix(x))
    block = embed_rows(extractor, inputs, ids(7), batch_size=3, endpoint="samples")
    assert extractor.batch_sizes == [3, 3, 1]
    assert sp.issparse(block.matrix) and block.matrix.format == "csr"
    np.testing.assert_array_equal(block.matrix.toarray(), inputs)
    assert block.metadata() == {"n_rows": 7, "dim": 5, "dtype": "float64", "sparse": True}


def test_embed_rows_keeps_sparse_when_only_some_batches_are_sparse():
    calls = []

    def alternate(x):
        calls.append(1)
        return sp.csr_matrix(x) if len(calls) % 2 else x

    inputs = np.arange(12, dtype=np.float64).reshape(6, 2)
    block = embed_rows(RecordingExtractor("mixed", alternate), inputs, ids(6), batch_size=2, endpoint="samples")
    assert sp.issparse(block.matrix) and block.matrix.format == "csr"
    np.testing.assert_array_equal(block.matrix.toarray(), inputs)


def test_embed_rows_refuses_batches_of_different_widths():
    calls = []

    def widen(x):
        calls.append(1)
        return np.hstack([x, x]) if len(calls) == 2 else x

    with pytest.raises(ValidationError, match=r"'widener'.*different widths: \[2, 4\]"):
        embed_rows(RecordingExtractor("widener", widen), np.ones((4, 2)), ids(4), batch_size=2, endpoint="samples")


# -- merge_blocks ---------------------------------------------------------------------------------------


def _block(values, row_ids, dtype=np.float64):
    return EmbeddingBlock(np.asarray(values, dtype=dtype), tuple(row_ids))


def test_merge_blocks_concatenates_in_order():
    a = _block([[1, 2], [3, 4]], ["a", "b"])
    b = _block([[5, 6]], ["c"])
    merged = merge_blocks([a, b], ["a", "b", "c"], endpoint="samples")
    np.testing.assert_array_equal(merged.matrix, [[1, 2], [3, 4], [5, 6]])
    assert merged.row_ids == ("a", "b", "c")


def test_merge_blocks_refuses_shards_out_of_order_naming_the_row():
    a = _block([[1, 2], [3, 4]], ["a", "b"])
    b = _block([[5, 6], [7, 8]], ["c", "d"])
    with pytest.raises(ValidationError) as info:
        merge_blocks([b, a], ["a", "b", "c", "d"], endpoint="samples")
    message = str(info.value)
    assert "'samples'" in message
    assert "row 0" in message and "'c'" in message and "'a'" in message


def test_merge_blocks_refuses_a_foreign_row_id_naming_it():
    a = _block([[1, 2], [3, 4]], ["a", "b"])
    b = _block([[5, 6], [7, 8]], ["c", "x"])
    with pytest.raises(ValidationError, match=r"row 3 of the merged shards is 'x', expected 'd'"):
        merge_blocks([a, b], ["a", "b", "c", "d"], endpoint="samples")


def test_merge_blocks_refuses_a_missing_row_naming_it():
    # Row 'c' was dropped: the message should say which row is missing, not only the counts.
    a = _block([[1, 2], [3, 4]], ["a", "b"])
    b = _block([[7, 8]], ["d"])
    with pytest.raises(ValidationError) as info:
        merge_blocks([a, b], ["a", "b", "c", "d"], endpoint="samples")
    message = str(info.value)
    assert "'samples'" in message and "3" in message and "4" in message
    assert "'c'" in message, f"the missing row 'c' is not named: {message}"


def test_merge_blocks_refuses_no_shards():
    with pytest.raises(ValidationError, match="no shards"):
        merge_blocks([], ["a"], endpoint="samples")


def test_merge_blocks_refuses_mixed_dtypes():
    a = _block([[1, 2]], ["a"], dtype=np.float32)
    b = _block([[3, 4]], ["b"], dtype=np.float64)
    with pytest.raises(ValidationError, match=r"'samples'.*different dtypes \['float32', 'float64'\]"):
        merge_blocks([a, b], ["a", "b"], endpoint="samples")


def test_merge_blocks_keeps_csr():
    a = EmbeddingBlock(sp.csr_matrix(np.eye(3)[:2]), ("a", "b"))
    b = EmbeddingBlock(sp.csr_matrix(np.eye(3)[2:]), ("c",))
    merged = merge_blocks([a, b], ["a", "b", "c"], endpoint="samples")
    assert sp.issparse(merged.matrix) and merged.matrix.format == "csr"
    np.testing.assert_array_equal(merged.matrix.toarray(), np.eye(3))


# -- embed_endpoint -------------------------------------------------------------------------------------


def test_embed_endpoint_with_three_shards_equals_one_shard_for_precomputed():
    rng = np.random.default_rng(7)
    inputs = rng.normal(size=(11, 4)).astype(np.float32)
    row_ids = ids(11, "row-")
    one = embed_endpoint(PrecomputedExtractor("pre"), inputs, row_ids, shards=1, batch_size=2, endpoint="samples")
    three = embed_endpoint(PrecomputedExtractor("pre"), inputs, row_ids, shards=3, batch_size=2, endpoint="samples")
    assert one.row_ids == three.row_ids == row_ids
    assert one.matrix.dtype == three.matrix.dtype == np.float32
    np.testing.assert_array_equal(three.matrix, one.matrix)
    np.testing.assert_array_equal(three.matrix, inputs)


def test_embed_endpoint_uses_the_shard_and_batch_boundaries():
    extractor = RecordingExtractor("rec", lambda x: x)
    inputs = np.ones((10, 2))
    embed_endpoint(extractor, inputs, ids(10), shards=3, batch_size=2, endpoint="samples")
    # 5 batches over 3 shards: (0,2) (2,6) (6,10), each cut into batches of 2, the unsharded run's batches
    assert extractor.batch_sizes == [2, 2, 2, 2, 2]
    extractor = RecordingExtractor("rec", lambda x: x)
    embed_endpoint(extractor, np.ones((11, 2)), ids(11), shards=2, batch_size=4, endpoint="samples")
    assert extractor.batch_sizes == [4, 4, 3]  # shards (0,8) (8,11)


@pytest.mark.parametrize("steps", [
    [{"estimator": "sklearn.preprocessing.StandardScaler"},
     {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 16}}],
    [{"estimator": "sklearn.random_projection.GaussianRandomProjection", "params": {"n_components": 16}}],
])
def test_embeddings_are_bit_identical_whatever_the_shard_count(steps):
    # shards cut mid-batch used to change these pipelines' float64 outputs by ~1e-14 at 3 shards of digits
    from sklearn.datasets import load_digits

    from vertebrae.extractors.registry import build_extractor

    X = load_digits().data
    reference = None
    for shards in (1, 2, 3, 5, 8):
        extractor = build_extractor("pipeline", {"type": "sklearn", "steps": steps}, where="test")
        block = embed_endpoint(extractor, X, ids(len(X)), shards=shards, batch_size=256, endpoint="samples")
        if reference is None:
            reference = block.matrix
        assert np.array_equal(block.matrix, reference), f"{shards} shards"


# -- segments (WebDataset tar files) ---------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[5, 5, 3], [1, 9, 2, 7], [13], [4, 4, 4, 4, 1]])
@pytest.mark.parametrize("requested", [1, 2, 3, 8])
def test_shard_bounds_fall_on_tar_edges_and_batches_never_cross_one(sizes, requested):
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    n_rows = sum(sizes)
    bounds = shard_bounds(n_rows, requested, batch_size=4, segments=starts)
    assert len(bounds) == min(requested, len(sizes))  # never more shards than tars
    assert bounds[0][0] == 0 and bounds[-1][1] == n_rows and all(b[1] == c[0] for b, c in zip(bounds, bounds[1:]))
    assert all(a in starts for a, _ in bounds)  # a shard opens only its own tars
    tar_of = [i for i, size in enumerate(sizes) for _ in range(size)]
    whole = batch_ranges(n_rows, 4, starts)
    assert all(len({tar_of[r] for r in range(a, b)}) == 1 and b - a <= 4 for a, b in whole)  # no batch crosses a tar
    # each shard's own batches (its segments relative to its start) are the unsharded run's batches
    per_shard = [(a + x, a + y) for a, b in bounds for x, y in batch_ranges(b - a, 4, shard_segments(starts, a, b))]
    assert per_shard == whole


def _nearest_starts_oracle(n_rows, requested, starts):
    """Each shard edge: the segment start nearest the balanced row edge (ties: the earlier), scanning every start
    left for it, as the contract states."""
    count = min(requested, len(starts))
    chosen = [0]
    for i in range(1, count):
        candidates = range(chosen[-1] + 1, len(starts) - (count - i) + 1)
        chosen.append(min(candidates, key=lambda j: (abs(starts[j] - n_rows * i / count), j)))
    edges = [starts[j] for j in chosen] + [n_rows]
    return list(zip(edges[:-1], edges[1:]))


def test_segment_shard_edges_equal_a_scan_of_every_start():
    rng = np.random.default_rng(7)
    for _ in range(3000):  # equal gaps make ties: the earlier start must win, as in the scan
        gaps = rng.choice([1, 1, 2, 3, 5, 10, 100], size=int(rng.integers(1, 40)))
        starts = [0, *np.cumsum(gaps[:-1]).tolist()]
        n_rows, requested = int(gaps.sum()), int(rng.integers(1, 50))
        assert shard_bounds(n_rows, requested, batch_size=4, segments=starts) == \
            _nearest_starts_oracle(n_rows, requested, starts)


def test_segment_shards_balance_rows_and_other_sources_keep_batch_bounds():
    assert shard_bounds(13, 2, batch_size=4, segments=[0, 5, 10]) == [(0, 5), (5, 13)]
    assert shard_bounds(20, 2, batch_size=4, segments=[0, 2, 4, 6, 18]) == [(0, 6), (6, 20)]
    assert shard_bounds(13, 3, batch_size=4, segments=[0, 5, 10]) == [(0, 5), (5, 10), (10, 13)]
    assert shard_bounds(13, 2, batch_size=4) == shard_bounds(13, 2, batch_size=4, segments=None) == [(0, 8), (8, 13)]
    assert batch_ranges(13, 4, [0, 5, 10]) == [(0, 4), (4, 5), (5, 9), (9, 10), (10, 13)]
    assert batch_ranges(13, 4) == [(0, 4), (4, 8), (8, 12), (12, 13)]
    for bad in ([], [1, 5], [0, 5, 5], [0, 13]):
        with pytest.raises(ValidationError, match="segment starts"):
            shard_bounds(13, 2, batch_size=4, segments=bad)
