"""What a job asks the scheduler for: ``mem_mb`` sized from what the plan knows before any job runs.

Embedding and fit jobs (``embed_mem_mb``): the interpreter and its imports (``INTERPRETER_MB``; a model's job
adds ``TORCH_MB`` for torch and its model library), the model's weights when they load from local files (twice
their size on disk: the file's tensors and the module built from them; ``UNKNOWN_WEIGHTS_MB`` when the weights
are a hub id or built by a callable), a model's forward pass over one batch (``ITEM_MB`` per item), and the
job's rows at ``DIM_BOUND`` float64 columns three times over (the source rows, the features, their float32
output), with a quarter on top. Widths are unknown until a job has run, hence the bound: rows much wider than
``DIM_BOUND`` need smaller shards (``shards``) or a larger request (``set-resources`` in a profile).

Partial-score jobs (``partial_mem_mb``): query and gallery rows at ``DIM_BOUND`` dimensions x 12 bytes
(float64 rows and their float32 scan copy) + one score block (query_block_size x gallery_block_size x 8), with a
quarter on top; never more than the one-job score's admission budget (max_dense_bytes) allows.

Embedding shards (``auto_shards``, config ``shards: auto``): a shard is a job of its own (a process start, imports,
a model load: seconds), so an endpoint gets one shard per ``AUTO_SHARD_SECONDS`` of estimated embedding work (a
model's rows ``MODEL_ROW_SECONDS`` each, other extractors' ``PLAIN_ROW_SECONDS``), and enough that no shard holds
more than ``AUTO_MAX_ROWS`` rows (its memory, above): a small endpoint is one job.

Labelled part jobs (``part_priority``): a candidate's parts become ready together, and a local run starts them in
no particular order; a long part started last ends the fan-out alone, so the longest start first (the order that
leaves the least idle core at the end). Parts whose work grows with the rows squared (``knn``, a job per fold:
every test row against every train row; ``linear_probe``: folds x inner folds x grid fits) ask for priority 2;
the other metrics, whose work grows with rows x iterations (``clustering``: k-means repeats and inits;
``few_shot``: episodes), priority 1; OverlapIndex, its stability repeats, Separatix and every other job keep 0.
(At 100,000 x 512 with 100 classes, one thread: a kNN fold 20 s, clustering 21 s, few-shot 13 s, OverlapIndex
and each stability repeat 9 s.)

Other rules ask for fixed amounts (the workflow profile, ``profiles/default``): their working set is admitted
against ``max_dense_bytes`` before any work.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.extractors.torch_runtime import model_files

INTERPRETER_MB = 650  # the interpreter and vertebrae's imports (numpy, scipy, scikit-learn, h5py)
TORCH_MB = 1_000  # torch and transformers / open_clip on top of it
UNKNOWN_WEIGHTS_MB = 2_048  # a model whose weights are not local files the plan can see
ITEM_MB = 4  # one batch item's activations in a model's forward pass (inference, no gradients)
DIM_BOUND = 1_024  # columns assumed for a job's rows (widths are known only once a job has run)
_MIB = 2 ** 20
AUTO_SHARD_SECONDS = 60.0  # embedding work that pays for a shard's own job
MODEL_ROW_SECONDS = 0.02  # a torch model's forward pass per row on a CPU (order of magnitude)
PLAIN_ROW_SECONDS = 1e-5  # a precomputed row, a callable's or a scikit-learn pipeline's
AUTO_MAX_ROWS = 200_000  # rows a shard at most (its job's memory, embed_mem_mb)
AUTO_MAX_SHARDS = 64


def weights_bytes(paths: Sequence[str | os.PathLike] | None) -> int | None:
    """Bytes of the files under ``paths`` (files, or model folders: ``model_files``); None when unknown."""
    if paths is None:
        return None
    files = (f for path in map(Path, paths) for f in ([path] if path.is_file() else model_files(path)))
    return sum(f.stat().st_size for f in files)


def embed_mem_mb(extractor: Any, *, rows: int, batch_size: int) -> int:
    """mem_mb of a job that embeds (or fits on) ``rows`` rows with ``extractor`` (see the module docstring);
    ``batch_size``: the model's batch (config ``embedding.batch_size`` or the extractor's own)."""
    working = 3 * 8 * DIM_BOUND * int(rows)
    base = INTERPRETER_MB
    weight_files = getattr(extractor, "weight_files", None)
    if weight_files is not None:  # a model extractor (torch)
        size = weights_bytes(weight_files())
        base += TORCH_MB + (UNKNOWN_WEIGHTS_MB if size is None else 2 * -(-size // _MIB))
        working += ITEM_MB * _MIB * int(getattr(extractor, "batch_size", None) or batch_size)
    return base + -(-int(1.25 * working) // _MIB)


def auto_shards(extractor: Any, rows: int) -> int:
    """Shards for an endpoint of ``rows`` rows embedded by ``extractor`` (module docstring); at least 1."""
    per_row = MODEL_ROW_SECONDS if getattr(extractor, "weight_files", None) is not None else PLAIN_ROW_SECONDS
    by_time = int(int(rows) * per_row // AUTO_SHARD_SECONDS)
    by_memory = -(-int(rows) // AUTO_MAX_ROWS)
    return max(1, min(AUTO_MAX_SHARDS, max(by_time, by_memory)))


LONG_PARTS = ("knn", "linear_probe")  # built-in metric types that start first (the module docstring)
MEDIUM_PARTS = ("clustering", "few_shot")  # built-in metric types that start next


def part_priority(recipe: Mapping[str, Any]) -> int:
    """Scheduling priority of a labelled part job from its recipe: 2 for a ``LONG_PARTS`` metric, 1 for a
    ``MEDIUM_PARTS`` one, else 0."""
    metric = recipe.get("metric") if recipe.get("part") == "metric" else None
    kind = metric.get("type") if isinstance(metric, Mapping) else None
    return 2 if kind in LONG_PARTS else 1 if kind in MEDIUM_PARTS else 0


def partial_mem_mb(retrieval: Mapping[str, Any], q_rows: int, g_rows: int) -> int:
    """mem_mb of a partial-score job of ``q_rows`` queries against ``g_rows`` gallery rows (``retrieval``: the
    spec's RetrievalConfig as a dict)."""
    block = 8 * min(retrieval["query_block_size"], q_rows) * min(retrieval["gallery_block_size"], g_rows)
    working = 1.25 * (12 * (q_rows + g_rows) * DIM_BOUND + block)
    return INTERPRETER_MB + -(-int(min(working, retrieval["max_dense_bytes"])) // _MIB)


__all__ = ["DIM_BOUND", "INTERPRETER_MB", "ITEM_MB", "TORCH_MB", "UNKNOWN_WEIGHTS_MB",
           "embed_mem_mb", "part_priority", "partial_mem_mb", "weights_bytes"]
