"""Protocol-independent stages: shard planning, fitting, embedding rows, merging shards, row-id and name checks.

Recipes here name every embedding artifact: ``fingerprint("embedding", embedding_recipe(...))`` depends on
the dataset identity, the endpoint and the extractor recipe only (not on names, paths or shard counts).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.labels import describe_key
from vertebrae.core.memory import EmbeddingAccumulator, MemoryConfig
from vertebrae.core.arrays import as_matrix, check_finite, stack_blocks
from vertebrae.core.config import CacheConfig
from vertebrae.extractors.base import Extractor
from vertebrae.scoring.paired import ComparisonConfig


@dataclass(frozen=True)
class EmbeddingBlock:
    """Embedding rows (dense float or CSR) with their row ids (semantic keys), in order."""

    matrix: np.ndarray | sp.csr_matrix
    row_ids: tuple[str, ...]

    def metadata(self) -> dict[str, Any]:
        return {
            "n_rows": int(self.matrix.shape[0]),
            "dim": int(self.matrix.shape[1]),
            "dtype": str(self.matrix.dtype),
            "sparse": bool(sp.issparse(self.matrix)),
        }


def shard_bounds(n_rows: int, requested: int, *, batch_size: int,
                 segments: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """Contiguous row ranges that start on a batch start, balanced in whole batches (or, with ``segments``, rows).

    Every shard then embeds exactly the batches an unsharded run embeds (``batch_ranges``), so the merged
    embeddings are bit-identical whatever the shard count (a model's output for a row may depend in its last
    bits on the other rows of its batch). The shard count is capped at the number of batches.

    ``segments``: the row offsets where segments start (a WebDataset source: one segment per tar file, in order).
    Batches then restart at every segment start and shards start on segment starts only, balanced by rows, at
    most one shard per segment: a shard job reads its own tar files and no other.
    """
    if n_rows < 1:
        raise ValidationError("an endpoint needs at least one row to be embedded")
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise ValidationError(f"shard count must be a positive integer, got {requested!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be a positive integer, got {batch_size!r}")
    if segments is not None:
        starts = check_segments(segments, n_rows)
        count = min(requested, len(starts))
        chosen = [0]
        for i in range(1, count):  # the segment start nearest the balanced row edge, leaving one per later shard
            lo, hi = chosen[-1] + 1, len(starts) - (count - i)
            target = n_rows * i / count
            after = bisect_left(starts, target, lo, hi + 1)  # starts increase: the nearest is this one or the one before
            chosen.append(min((j for j in (after - 1, after) if lo <= j <= hi), key=lambda j: (abs(starts[j] - target), j)))
        edges = [starts[j] for j in chosen] + [n_rows]
        return list(zip(edges[:-1], edges[1:]))
    batches = -(-n_rows // batch_size)
    count = min(requested, batches)
    edges = [min(n_rows, batch_size * (batches * i // count)) for i in range(count + 1)]
    return list(zip(edges[:-1], edges[1:]))


def check_segments(segments: Sequence[int], n_rows: int) -> list[int]:
    """Segment starts: 0 first, strictly increasing, below ``n_rows`` (a ValidationError says which is not)."""
    starts = [int(s) for s in segments]
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n_rows:
        raise ValidationError(f"segment starts must begin at 0 and increase below {n_rows} rows, got "
                              f"{starts[:10]}{' ...' if len(starts) > 10 else ''}")
    return starts


def batch_ranges(n_rows: int, batch_size: int, segments: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """``[start, stop)`` of every batch: ``batch_size`` rows at a time, restarting at every segment start."""
    if n_rows == 0:
        return []
    starts = [0] if segments is None else check_segments(segments, n_rows)
    ends = starts[1:] + [n_rows]
    return [(a, min(a + batch_size, stop)) for start, stop in zip(starts, ends) for a in range(start, stop, batch_size)]


def shard_segments(segments: Sequence[int] | None, start: int, stop: int) -> list[int] | None:
    """The segment starts inside shard ``[start, stop)``, relative to ``start`` (None without segments)."""
    if segments is None:
        return None
    inner = [int(s) - start for s in segments if start <= int(s) < stop]
    if not inner or inner[0] != 0:
        raise ValidationError(f"shard rows {start}..{stop - 1} do not start on a segment start")
    return inner


def tar_segments(inputs: Any) -> list[int] | None:
    """Segment starts of raw inputs read from WebDataset tar files (where the tar file changes), else None."""
    from vertebrae.core.image_refs import TAR_PREFIX, container_path
    from vertebrae.core.inputs import RawInputs

    if not isinstance(inputs, RawInputs) or not inputs.values or not all(
            isinstance(v, str) and v.startswith(TAR_PREFIX) for v in inputs.values):
        return None
    tars = [container_path(v) for v in inputs.values]
    return [0] + [i for i in range(1, len(tars)) if tars[i] != tars[i - 1]]


def fit_recipe(identity_key: str, endpoint: str, extractor: Extractor) -> dict[str, Any]:
    return {"dataset": identity_key, "endpoint": endpoint, "extractor": extractor.recipe()}


def extractor_entry(name: str, decl: dict[str, Any], where: str, extractor: Extractor | None = None,
                    branch: str | None = None) -> dict[str, Any]:
    """A job spec's extractor: its name, declaration and config location; an embedding job of one ``branch`` gets
    only the declaration that branch reads (``Extractor.branch_decl``), so another branch's edit leaves its spec."""
    if extractor is not None and branch is not None:
        decl = extractor.branch_decl(decl, branch)
    return {"name": name, "decl": decl, "where": where}


def embedding_recipe(identity_key: str, endpoint: str, extractor: Extractor, branch: str | None = None,
                     fit_endpoint: str | None = None, fit_identity: str | None = None) -> dict[str, Any]:
    """Recipe of one endpoint's embeddings; a learning extractor's fit (on ``fit_endpoint``, by default the
    endpoint itself, whose identity is ``fit_identity``, by default ``identity_key``) is part of it. A retrieval
    endpoint passes its own endpoint key (``RetrievalDataset.endpoint_key``), never the dataset's."""
    recipe = {"dataset": identity_key, "endpoint": endpoint,
              "extractor": extractor.recipe() if branch is None else extractor.branch_recipe(branch)}
    if branch is not None:
        recipe["branch"] = branch
    if extractor.learns:
        recipe["fit"] = fingerprint("fitted-extractor", fit_recipe(fit_identity or identity_key, fit_endpoint or endpoint,
                                                                   extractor))
    return recipe


def row_count(inputs: Any) -> int:
    """Rows of an endpoint's inputs: an array's first axis, or a sequence's length (a list of texts or paths)."""
    return int(inputs.shape[0]) if hasattr(inputs, "shape") else len(inputs)


def embed_rows(
    extractor: Extractor, inputs: Any, row_ids: Sequence[str], *, batch_size: int, endpoint: str, branch: str | None = None,
    memory: MemoryConfig | None = None, accumulator: EmbeddingAccumulator | None = None, offset: int = 0,
    segments: Sequence[int] | None = None, clock: Any = None,
) -> EmbeddingBlock | None:
    """Transform ``inputs`` (through ``branch``) in batches of ``batch_size`` rows (restarting at every start of
    ``segments``, row offsets into ``inputs``: see ``batch_ranges``); outputs must be finite, one row per
    input row. Batches accumulate under ``memory`` (see ``vertebrae.core.memory``); with an external
    ``accumulator`` (several shards streamed into one endpoint) they are added to it and None is returned. ``clock``
    (a ``vertebrae.core.throughput.BatchClock``) gets every batch's rows and seconds."""
    extractor.check_branch(branch)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be a positive integer, got {batch_size!r}")
    n_rows = row_count(inputs)
    if len(row_ids) != n_rows:
        raise ValidationError(f"endpoint {endpoint!r}: {len(row_ids)} row ids for {n_rows} rows")
    external = accumulator is not None
    accumulator = accumulator if external else EmbeddingAccumulator(n_rows, memory, endpoint=endpoint)
    widths = set()
    by_row = getattr(extractor, "reads_rows", False)  # precomputed files: rows looked up by row id / position
    for start, stop in batch_ranges(n_rows, batch_size, segments):
        began = time.perf_counter()
        batch = inputs[start:stop]
        expected = stop - start
        if by_row:
            raw = extractor.transform(batch, branch=branch, row_ids=row_ids[start:start + expected],
                                      rows=(offset + start, offset + start + expected))
        else:  # branch-less extractors may implement transform(rows) without the branch keyword
            raw = extractor.transform(batch) if branch is None else extractor.transform(batch, branch=branch)
        accumulator.add(_checked_batch(raw, extractor.name, row_ids, start, expected, endpoint, widths))
        if clock is not None:
            clock.batch(expected, time.perf_counter() - began)
    if n_rows == 0:
        raise ValidationError(f"endpoint {endpoint!r}: no rows to embed")
    return None if external else EmbeddingBlock(accumulator.result(), tuple(row_ids))


def _checked_batch(raw: Any, name: str, row_ids: Sequence[str], start: int, expected: int, endpoint: str,
                   widths: set[int]) -> Any:
    """One batch of an extractor's output as a matrix: one finite row per input row, the width of the others."""
    out = as_matrix(raw, what=f"extractor {name!r} output")
    if out.shape[0] != expected:
        raise ValidationError(
            f"extractor {name!r} returned {out.shape[0]} rows for a batch of {expected} "
            f"(endpoint {endpoint!r}, rows {start}..{start + expected - 1})"
        )
    check_finite(out, row_ids[start:start + expected], offset=start,
                 what=f"endpoint {endpoint!r} embeddings from extractor {name!r}")
    widths.add(out.shape[1])
    if len(widths) > 1:
        raise ValidationError(f"extractor {name!r} returned batches of different widths: {sorted(widths)}")
    return out


def embed_rows_layers(extractor: Any, inputs: Any, row_ids: Sequence[str], layers: Sequence[int], *, batch_size: int,
                      endpoint: str, branch: str | None = None, segments: Sequence[int] | None = None,
                      clock: Any = None) -> dict[int, EmbeddingBlock]:
    """A layer sweep's ``embed_rows``: ``{layer: block}`` from one forward pass per batch
    (``extractor.transform_layers``), each block the one ``embed_rows`` gives with the single-layer extractor."""
    extractor.check_branch(branch)
    n_rows = row_count(inputs)
    if len(row_ids) != n_rows:
        raise ValidationError(f"endpoint {endpoint!r}: {len(row_ids)} row ids for {n_rows} rows")
    if n_rows == 0:
        raise ValidationError(f"endpoint {endpoint!r}: no rows to embed")
    accumulators = {layer: EmbeddingAccumulator(n_rows, None, endpoint=endpoint) for layer in layers}
    widths: dict[int, set[int]] = {layer: set() for layer in layers}
    for start, stop in batch_ranges(n_rows, batch_size, segments):
        began = time.perf_counter()
        expected = stop - start
        outs = extractor.transform_layers(inputs[start:stop], list(layers), branch=branch)
        for layer in layers:
            name = f"{extractor.name}@{layer}"
            accumulators[layer].add(_checked_batch(outs[layer], name, row_ids, start, expected, endpoint, widths[layer]))
        if clock is not None:  # one forward pass for every layer: each layer's file records the pass's time
            clock.batch(expected, time.perf_counter() - began)
    return {layer: EmbeddingBlock(acc.result(), tuple(row_ids)) for layer, acc in accumulators.items()}


def merge_blocks(blocks: Sequence[EmbeddingBlock], expected_row_ids: Sequence[str], *, endpoint: str) -> EmbeddingBlock:
    """Concatenate shard blocks in order; the row ids must equal the endpoint's, in order."""
    if not blocks:
        raise ValidationError(f"endpoint {endpoint!r}: no shards to merge")
    row_ids = tuple(rid for block in blocks for rid in block.row_ids)
    if row_ids != tuple(expected_row_ids):
        if len(row_ids) != len(expected_row_ids):
            held = set(row_ids)
            missing = [describe_key(rid) for rid in expected_row_ids if rid not in held][:10]
            raise ValidationError(
                f"endpoint {endpoint!r}: shards hold {len(row_ids)} rows, expected {len(expected_row_ids)}"
                + (f"; missing row id(s) {', '.join(missing)}" if missing else "")
            )
        i = next(i for i, (a, b) in enumerate(zip(row_ids, expected_row_ids)) if a != b)
        raise ValidationError(
            f"endpoint {endpoint!r}: row {i} of the merged shards is {describe_key(row_ids[i])}, "
            f"expected {describe_key(expected_row_ids[i])}"
        )
    matrix = stack_blocks([block.matrix for block in blocks], endpoint)
    dtypes = {str(block.matrix.dtype) for block in blocks}
    if len(dtypes) > 1:
        raise ValidationError(f"endpoint {endpoint!r}: shards have different dtypes {sorted(dtypes)}")
    return EmbeddingBlock(matrix, row_ids)


def embed_endpoint(
    extractor: Extractor, inputs: Any, row_ids: Sequence[str], *, shards: int, batch_size: int, endpoint: str,
    branch: str | None = None, fit: bool = True, memory: MemoryConfig | None = None,
    segments: Sequence[int] | None = None,
) -> EmbeddingBlock:
    """In-process twin of fit -> embed-shard x N -> merge, with the same shard and batch boundaries.

    ``segments`` (see ``shard_bounds``) default to ``tar_segments(inputs)``: rows read from WebDataset tar files
    are batched and sharded per tar file, as the workflow plans them.

    ``fit=False`` embeds with an extractor already fitted (e.g. on the gallery, the retrieval fit endpoint).
    With ``memory`` every shard streams into one accumulator bounded by it (spilling to disk or refusing).
    """
    if extractor.learns and fit:
        extractor.fit(inputs)
    if getattr(extractor, "reads_rows", False):  # a file must cover exactly the endpoint's rows
        extractor.check_rows(row_ids, branch=branch, endpoint=endpoint)
    if segments is None:
        segments = tar_segments(inputs)
    bounds = shard_bounds(row_count(inputs), shards, batch_size=batch_size, segments=segments)
    if memory is not None:
        accumulator = EmbeddingAccumulator(row_count(inputs), memory, endpoint=endpoint)
        for a, b in bounds:
            embed_rows(extractor, inputs[a:b], row_ids[a:b], batch_size=batch_size, endpoint=endpoint, branch=branch,
                       accumulator=accumulator, offset=a, segments=shard_segments(segments, a, b))
        return EmbeddingBlock(accumulator.result(), tuple(row_ids))
    blocks = [
        embed_rows(extractor, inputs[a:b], row_ids[a:b], batch_size=batch_size, endpoint=endpoint, branch=branch,
                   offset=a, segments=shard_segments(segments, a, b))
        for a, b in bounds
    ]
    return merge_blocks(blocks, row_ids, endpoint=endpoint)


def embed_cached(compute: Callable[[], EmbeddingBlock], *, fp: str, recipe: dict[str, Any], cache: CacheConfig,
                 reusable: bool, folder: str) -> tuple[EmbeddingBlock, str]:
    """An in-process run's embeddings through its cache: ``(block, cache status)``.

    Status "disabled" (no cache), "bypassed_unsafe_identity" (``reusable`` false: the extractor or dataset identity
    does not name its bytes across runs), "hit" (the verified artifact ``cache_dir/folder/{fp}.h5`` is read) or "miss"
    (``compute()`` runs and its block is written there).
    """
    from vertebrae.core.artifacts import read_embeddings, write_embeddings

    if not cache.enabled:
        return compute(), "disabled"
    if not reusable:
        return compute(), "bypassed_unsafe_identity"
    path = Path(cache.cache_dir) / folder / f"{fp}.h5"
    if path.exists():
        artifact = read_embeddings(path, fingerprint=fp)
        return EmbeddingBlock(artifact.matrix, artifact.row_ids), "hit"
    block = compute()
    write_embeddings(path, block.matrix, list(block.row_ids), fingerprint=fp, recipe=recipe)
    return block, "miss"


def check_row_ids(block: EmbeddingBlock, expected: Sequence[str], endpoint: str) -> None:
    """The block's row ids equal the protocol's ``expected`` ids, in order; a ValidationError names the first difference."""
    if tuple(block.row_ids) == tuple(expected):
        return
    if len(block.row_ids) != len(expected):
        raise ValidationError(f"endpoint {endpoint!r}: embeddings have {len(block.row_ids)} rows, the protocol has {len(expected)}")
    i = next(i for i, (a, b) in enumerate(zip(block.row_ids, expected)) if a != b)
    raise ValidationError(f"endpoint {endpoint!r}: embedding row {i} is {describe_key(block.row_ids[i])}, protocol row "
                          f"is {describe_key(expected[i])}")


def check_unique_names(names: Sequence[str], benchmark: str) -> None:
    """A report ranks candidates by name: no name may appear twice."""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationError(f"benchmark {benchmark!r}: duplicate candidate names {duplicates}")


def comparison_config_or_default(config: Any, seed: int) -> ComparisonConfig:
    """``config``, or the default ComparisonConfig resampling with ``seed``; anything else is refused."""
    if config is None:
        return ComparisonConfig(seed=seed)
    if not isinstance(config, ComparisonConfig):
        raise ValidationError(f"comparison_config must be a ComparisonConfig, got {type(config).__name__}")
    return config
