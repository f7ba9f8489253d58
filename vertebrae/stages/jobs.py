"""The endpoint jobs of the labelled and retrieval protocols (fit, embed a shard, merge), and the file-level pieces
every protocol's jobs share: reading a verified embedding block, embedding and writing one shard, merging shards.

A job reads its plan artifact (``vertebrae.stages.plan.load_plan``) and verified input artifacts, calls the stage
functions and writes its output atomically. The protocol-specific jobs are in ``labelled_jobs``, ``retrieval_jobs``
and ``zero_shot_jobs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.arrays import encode_row_ids
from vertebrae.core.artifacts import read_embeddings, read_json_artifact, write_embeddings, write_json_artifact
from vertebrae.core.errors import ValidationError
from vertebrae.core.throughput import COSTS_KEY, KEY as THROUGHPUT, BatchClock, merged as merged_throughput, peak_rss_mb
from vertebrae.data.declared.labelled import load_declared_dataset, load_declared_rows
from vertebrae.data.declared.retrieval import load_retrieval_source
from vertebrae.extractors.precomputed import PrecomputedExtractor, PrecomputedFileExtractor
from vertebrae.stages.common import EmbeddingBlock, embed_rows, embed_rows_layers, merge_blocks, shard_segments
from vertebrae.stages.plan import BASE_DIR, load_plan, shard_fingerprint, spec_extractor, spec_kind


def read_block(path: str | Path, fp: str) -> tuple[EmbeddingBlock, dict[str, Any]]:
    """The verified embedding artifact ``path`` (fingerprint ``fp``) as a block, with its manifest metadata."""
    artifact = read_embeddings(path, fingerprint=fp)
    return EmbeddingBlock(artifact.matrix, artifact.row_ids), artifact.manifest.get("metadata") or {}


def shard_rows(plan: str | Path, spec: Mapping[str, Any], shard_index: int, side: str | None) -> tuple[int, int]:
    """The row range ``[start, stop)`` of one shard of an embedding spec; ``side``, when given, must be the spec's."""
    if side is not None and spec.get("side") != side:
        raise ValidationError(f"{plan}: the plan embeds side {spec.get('side')!r}, not {side!r}")
    if not 0 <= shard_index < len(spec["shards"]):
        raise ValidationError(f"{plan}: shard index {shard_index} is outside 0..{len(spec['shards']) - 1}")
    start, stop = spec["shards"][shard_index]
    return start, stop


def write_shard(output: str | Path, spec: Mapping[str, Any], shard_index: int, extractor: Any, inputs: Any,
                row_ids: Sequence[str], *, endpoint: str, branch: str | None, clock: BatchClock | None = None) -> None:
    """Embed one shard's rows in the spec's batches (restarting at its segments) and write it under its shard
    fingerprint, with its throughput record (``vertebrae.core.throughput``; ``clock``: started before the extractor
    was built, so that its load time is known) in the manifest's metadata."""
    clock = clock or BatchClock()
    clock.precomputed = isinstance(extractor, (PrecomputedExtractor, PrecomputedFileExtractor))  # rows as given or read
    start, stop = spec["shards"][shard_index]
    block = embed_rows(extractor, inputs, row_ids, batch_size=spec["batch_size"], endpoint=endpoint, branch=branch,
                       offset=start, segments=shard_segments(spec.get("segments"), start, stop), clock=clock)
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=shard_fingerprint(spec, shard_index),
                     recipe={"parent": spec["fingerprint"], "rows": [start, stop]},
                     metadata={THROUGHPUT: clock.to_metadata()})


def merge_shard_files(plan: str | Path, spec: Mapping[str, Any], shards: Sequence[str | Path], output: str | Path,
                      *, endpoint: str) -> None:
    """Verify each shard against its planned fingerprint, merge in row order and write the endpoint artifact;
    ``endpoint`` names the spec key holding the endpoint name (errors cite it)."""
    if len(shards) != len(spec["shards"]):
        raise ValidationError(f"{plan}: {len(shards)} shard files given, the plan has {len(spec['shards'])}")
    shards = [Path(path) / f"{spec['fingerprint']}.h5" if Path(path).is_dir() else path for path in shards]  # a sweep's
    read = [read_block(path, shard_fingerprint(spec, i)) for i, path in enumerate(shards)]
    blocks = [block for block, _ in read]
    block = merge_blocks(blocks, [rid for b in blocks for rid in b.row_ids], endpoint=spec[endpoint])
    if block.matrix.shape[0] != spec["n_rows"]:
        raise ValidationError(f"{plan}: merged shards hold {block.matrix.shape[0]} rows, expected {spec['n_rows']}")
    throughput = merged_throughput(metadata.get(THROUGHPUT) for _, metadata in read)
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                     metadata={} if throughput is None else {THROUGHPUT: throughput})


def check_score_count(plan: str | Path, spec: Mapping[str, Any], scores: Sequence[str | Path]) -> None:
    """A report job gets one score file per planned candidate."""
    if len(scores) != len(spec["candidates"]):
        raise ValidationError(f"{plan}: {len(scores)} score files given, the plan has {len(spec['candidates'])} candidates")


def _retrieval_source(spec: Mapping[str, Any]):
    return load_retrieval_source(spec["dataset"]["source"], base_dir=BASE_DIR, where=f"{spec['where']}.source")


def run_fit(plan: str | Path, output: str | Path) -> None:
    """``vertebrae fit-extractor``: fit a learning extractor on its fit endpoint (a retrieval one: the gallery)."""
    spec = load_plan(plan, "fit")
    if spec_kind(spec) == "retrieval":
        inputs = _retrieval_source(spec).gallery
    else:
        inputs = load_declared_dataset(spec["dataset"], base_dir=BASE_DIR, where=spec["where"]).inputs
    extractor = spec_extractor(spec)
    extractor.fit(inputs)
    state = {**extractor.fitted_state(), COSTS_KEY: {"peak_mb": peak_rss_mb()}}  # the fit job's peak: a cost
    write_json_artifact(output, "fitted-extractor", state, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def planned_tar_rows(spec: Mapping[str, Any], start: int, stop: int) -> tuple[Any, list[str]] | None:
    """Rows ``[start, stop)`` and row ids of an embedding spec whose plan records its WebDataset tar files
    (``spec["tars"]``, ``vertebrae.stages.plan.endpoint_tars``), read from the tars holding them only, each checked
    against its recorded digest and row count first; None for a spec without ``tars``."""
    if spec.get("tars") is None:
        return None
    from vertebrae.core.file_digests import FileDigests

    digests = FileDigests.under(BASE_DIR)
    where = f"{spec['where']}.source"
    if spec_kind(spec) == "retrieval":
        from vertebrae.data.declared.sides import load_planned_side_rows

        side = "queries" if spec["side"] == "query" else "gallery"
        inputs, ids = load_planned_side_rows(spec["dataset"]["source"], side, spec["tars"], base_dir=BASE_DIR,
                                             where=where, start=start, stop=stop, digests=digests)
    else:
        from vertebrae.data.sources.webdataset import load_planned_source_rows

        inputs, ids = load_planned_source_rows(spec["dataset"]["source"], spec["tars"], base_dir=BASE_DIR, where=where,
                                               start=start, stop=stop, digests=digests)
    digests.save()
    return inputs, encode_row_ids(list(ids), stop - start, what=f"{spec['where']} rows {start}..{stop - 1}")


def _endpoint_rows(spec: Mapping[str, Any], start: int, stop: int) -> tuple[Any, list[str]]:
    """Rows ``[start, stop)`` of a labelled or retrieval embedding spec's endpoint, with their row ids."""
    planned = planned_tar_rows(spec, start, stop)
    if planned is not None:
        return planned
    if spec_kind(spec) == "retrieval":
        data = _retrieval_source(spec)
        rows, ids = (data.queries, data.query_ids) if spec["side"] == "query" else (data.gallery, data.gallery_ids)
        return rows[start:stop], encode_row_ids(list(ids[start:stop]), stop - start, what=spec["where"])
    return load_declared_rows(spec["dataset"], base_dir=BASE_DIR, where=spec["where"], start=start, stop=stop)


def run_embed_shard(plan: str | Path, shard_index: int, output: str | Path, *, side: str | None = None) -> None:
    """``vertebrae embed-shard`` / ``embed-retrieval-shard``: one shard of an endpoint; ``side`` (query | gallery) must
    match the plan of a retrieval endpoint."""
    spec = load_plan(plan, "embed")
    start, stop = shard_rows(plan, spec, shard_index, side)
    clock = BatchClock()
    extractor = spec_extractor(spec)
    if spec["fit"] is not None:
        state = read_json_artifact(spec["fit"]["path"], "fitted-extractor", fingerprint=spec["fit"]["fingerprint"])
        extractor.load_fitted(state, source=spec["fit"]["path"])
        clock.fitted(state)
    clock.loaded()
    inputs, row_ids = _endpoint_rows(spec, start, stop)
    write_shard(output, spec, shard_index, extractor, inputs, row_ids, endpoint=spec["endpoint"], branch=spec.get("branch"),
                clock=clock)


def run_embed_sweep_shard(plan: str | Path, shard_index: int, output: str | Path) -> None:
    """``vertebrae embed-sweep-shard``: one shard of a layer sweep, every layer from one forward pass per batch,
    written as the folder ``output`` of ``{layer fingerprint}.h5`` shard files (each the file the single-layer
    embed job writes; see ``vertebrae.planning.sweeps``)."""
    import os
    import shutil
    import tempfile

    spec = load_plan(plan, "embed-sweep")
    start, stop = shard_rows(plan, spec, shard_index, None)
    clock = BatchClock()
    extractor = spec_extractor(spec)
    clock.loaded()
    inputs, row_ids = _endpoint_rows(spec, start, stop)
    layers = [layer["layer"] for layer in spec["layers"]]
    blocks = embed_rows_layers(extractor, inputs, row_ids, layers, batch_size=spec["batch_size"],
                               endpoint=spec["endpoint"], branch=spec.get("branch"),
                               segments=shard_segments(spec.get("segments"), start, stop), clock=clock)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    try:
        for layer in spec["layers"]:
            block = blocks[layer["layer"]]
            layer_spec = {"fingerprint": layer["fingerprint"], "shards": spec["shards"]}
            write_embeddings(staging / f"{layer['fingerprint']}.h5", block.matrix, list(block.row_ids),
                             fingerprint=shard_fingerprint(layer_spec, shard_index),
                             recipe={"parent": layer["fingerprint"], "rows": [start, stop]},
                             metadata={THROUGHPUT: clock.to_metadata()})
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def run_merge(plan: str | Path, shards: Sequence[str | Path], output: str | Path) -> None:
    """``vertebrae merge-embeddings`` / ``merge-retrieval-embeddings``: an endpoint's shards, in order, as one artifact."""
    merge_shard_files(plan, load_plan(plan, "embed"), shards, output, endpoint="endpoint")


__all__ = ["check_score_count", "merge_shard_files", "planned_tar_rows", "read_block", "run_embed_shard", "run_embed_sweep_shard", "run_fit", "run_merge", "shard_rows", "write_shard"]
