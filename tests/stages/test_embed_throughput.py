"""Embedding cost as steady-state throughput measured inside the embed jobs (``vertebrae.core.throughput``): every
shard records its batches, model load and process start apart, in its manifest's metadata (no fingerprint moves); the
merge keeps every shard's record; the score job carries it; the report's cost is the median rate of the batches after
each shard's first, "too few rows to measure" on a small run, never a number, and 0 for a precomputed file.

The jobs are driven by hand in a temporary folder, as the workflow runs them, with a real (tiny, random-weight) torch
model built offline (``tests/tiny_models.py:make_mlp``)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from vertebrae.core.artifacts import read_embeddings
from vertebrae.core.errors import ConfigError
from vertebrae.core.throughput import MIN_BATCHES, MIN_ROWS, summarize
from vertebrae.planning import plan, report_paths
from vertebrae.planning.paths import artifact_path
from vertebrae.reports.costs import CostConfig
from vertebrae.stages import jobs, labelled_jobs, report_job
from vertebrae.stages.plan import run_plan

plan_path, fitted_path, embedding_path, protocol_path, score_path = (
    partial(artifact_path, kind) for kind in ("plan", "fitted", "embedding", "protocol", "score"))


def _mlp(width: int, dropout: float) -> dict:
    """A tiny torch MLP; dropout is idle at inference, so two dropouts are the same model under two recipes."""
    return {"type": "torch", "factory": "tiny_models:make_mlp", "params": {"width": width, "out": 8, "dropout": dropout}}


def _config(source: dict, extractors: dict, *, shards: int, batch_size: int, costs: dict | None = None) -> dict:
    # 3 classes: the score jobs resample rows, one OverlapIndex fit per subsample; 20 (the least), not 200
    config = {"seed": 0, "embedding": {"shards": shards, "batch_size": batch_size},
              "benchmarks": {"b": {"dataset": {"source": source, "identity": {"kind": "content"}},
                                   "extractors": extractors, "row_resampling": {"resamples": 20}}}}
    return {**config, "costs": costs} if costs is not None else config


def _run(config: dict, *, interleave: bool = False) -> dict:
    """Every job of ``config`` in order (embed shards of different candidates interleaved when asked, so that a
    change of machine load falls on both alike); the report.json document."""
    p = plan(config)
    for fp in p.specs:
        run_plan(p.spec_json(fp), plan_path(fp))
    for fp in p.fingerprints("fit"):
        jobs.run_fit(plan_path(fp), fitted_path(fp))
    embeds = p.fingerprints("embed")
    work = [(fp, i, path) for fp in embeds for i, path in enumerate(p.shard_paths(fp))]
    if interleave:
        work.sort(key=lambda item: (item[1], embeds.index(item[0])))
    for fp, i, path in work:
        jobs.run_embed_shard(plan_path(fp), i, path)
    for fp in embeds:
        jobs.run_merge(plan_path(fp), p.shard_paths(fp), embedding_path(fp))
    for fp in p.fingerprints("protocol"):
        labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    for fp in p.fingerprints("score"):
        spec = p.spec(fp)
        labelled_jobs.run_score(plan_path(fp), spec["embedding"]["path"], spec["protocol"]["path"], score_path(fp))
    report_fp = p.reports["b"]
    compare_fp = p.comparisons[report_fp]
    inputs = p.inputs(compare_fp)
    paths = report_paths("b")
    report_job.run_compare(inputs["plan"], inputs["report_plan"], inputs["protocol"], inputs["scores"],
                           artifact_path("comparison", compare_fp))
    report_job.run_report(inputs["report_plan"], inputs["protocol"], inputs["scores"], paths["json"],
                          paths["markdown"], comparison=artifact_path("comparison", compare_fp))
    return {"plan": p, "report": json.loads(Path(paths["json"]).read_text(encoding="utf-8")),
            "markdown": Path(paths["markdown"]).read_text(encoding="utf-8")}


def _costs(report: dict) -> dict:
    return {c["name"]: c["metadata"]["cost"] for c in report["extractor_results"]}


def test_two_identical_models_under_two_names_cost_the_same(tmp_path, monkeypatch):
    """2,400 rows in two shards of batches of 64: 36 batches measured per candidate; the two copies (separate jobs:
    their recipes differ in an idle dropout) cost alike (within 2x on a busy machine; within 10% alone)."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2400, 64)).astype(np.float32)
    X[:, 0] += np.repeat([0.0, 2.0, 4.0], 800)
    np.savez(tmp_path / "data.npz", embeddings=X, labels=np.repeat(["a", "b", "c"], 800))
    config = _config({"type": "npz", "path": "data.npz"}, {"first": _mlp(64, 0.5), "copy": _mlp(64, 0.25)},
                     shards=2, batch_size=64)
    run = _run(config, interleave=True)
    p = run["plan"]
    assert len(p.fingerprints("embed")) == 2  # two jobs, not one shared
    for fp in p.fingerprints("embed"):
        records = [read_embeddings(path, fingerprint=None).manifest["metadata"]["throughput"]
                   for path in p.shard_paths(fp)]
        assert [len(r["batches"]) for r in records] == [19, 19] and all(r["load_s"] >= 0 for r in records)
        assert all(r["process_start_s"] is None or r["process_start_s"] > 0 for r in records)
        assert all(r["peak_mb"] > 0 for r in records)  # each embed job's own peak memory (MiB), carried alike
        merged = read_embeddings(embedding_path(fp), fingerprint=fp).manifest["metadata"]["throughput"]
        assert merged == {"shards": records}  # carried through the merge, shard by shard
    costs = _costs(run["report"])
    for cost in costs.values():
        assert cost["embed_status"] == "measured" and cost["embed_batches"] == 36
        assert cost["embed_seconds_per_1k_rows"] > 0 and cost["load_seconds"] >= 0
    a, b = (costs[name]["embed_seconds_per_1k_rows"] for name in ("first", "copy"))
    print(f"steady-state s / 1k rows: first {a:.4g}, copy {b:.4g}, ratio {max(a, b) / min(a, b):.3f}")
    # wall-clock medians: alone they agree within 3-9% (five runs, 2026-12-07), but `make test` runs a second test
    # process beside this one on 2 cores, which once made one copy 1.52x the other: the bound is loose on purpose
    # (speed itself is the benches' to measure; here, that identical work is costed alike)
    assert max(a, b) / min(a, b) <= 2.0
    # the deterministic cost names itself by default
    assert "(by size: bytes per vector, then dim)" in run["markdown"]


def test_a_178_row_run_is_too_few_rows_to_measure(tmp_path, monkeypatch):
    """sklearn's wine (178 rows): no number, in report.json, in report.md's table and in the line when throughput is
    the cost asked for; a precomputed file costs nothing to embed."""
    monkeypatch.chdir(tmp_path)
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    np.save(tmp_path / "raw.npy", X.astype(np.float32))
    config = _config({"type": "sklearn", "name": "wine"},
                     {"mlp": _mlp(13, 0.5), "raw": {"type": "precomputed", "path": "raw.npy"}},
                     shards=1, batch_size=16, costs={"cheapest_tied_by": "throughput"})
    run = _run(config)
    costs = _costs(run["report"])
    assert costs["mlp"]["embed_status"] == "too few rows to measure" and costs["mlp"]["embed_seconds_per_1k_rows"] is None
    assert costs["mlp"]["embed_batches"] == 11  # 12 batches of 16, the first left out: 162 rows < MIN_ROWS
    assert (costs["raw"]["embed_status"], costs["raw"]["embed_seconds_per_1k_rows"]) == ("precomputed", 0.0)
    assert run["report"]["metadata"]["costs"] == {"cheapest_tied_by": "throughput"}
    table = [line for line in run["markdown"].splitlines() if line.startswith("| mlp |")]
    assert len(table) == 1 and "| too few rows to measure |" in table[0]
    line = next(line for line in run["markdown"].splitlines() if "cheapest candidate statistically tied" in line)
    assert "(by throughput: steady-state embedding seconds per 1,000 rows)" in line
    if "mlp" in line.partition(":")[2]:
        assert "too few rows to measure" in line


def test_the_summary_pools_batches_after_each_shard_s_first():
    shard = {"load_s": 0.5, "process_start_s": 1.0, "precomputed": False,
             "batches": [[100, 9.0]] + [[100, 0.1]] * 5 + [[100, 0.2]] * 2}
    summary = summarize([{"shards": [shard, shard]}])
    assert (summary["status"], summary["batches"], summary["rows"]) == ("measured", 14, 1400)
    assert summary["rows_per_second"] == 1000.0 and summary["seconds_per_1k_rows"] == pytest.approx(1.0)
    assert (summary["load_s"], summary["process_start_s"]) == (1.0, 2.0)  # recorded apart, summed over the shards
    few = {**shard, "batches": shard["batches"][: MIN_BATCHES]}
    assert summarize([few])["status"] == "too few rows to measure" and MIN_ROWS > 300
    assert summarize([{"shards": [shard]}, None])["status"] == "unknown"  # an endpoint without a record
    assert summarize([None])["seconds_per_1k_rows"] is None
    assert summarize([{**shard, "precomputed": True}])["seconds_per_1k_rows"] == 0.0


def test_the_cost_option_is_validated_at_construction():
    assert CostConfig().cheapest_tied_by == "size" and CostConfig.from_dict({}).is_default
    with pytest.raises(ConfigError, match="cheapest_tied_by"):
        CostConfig("speed")
    with pytest.raises(ConfigError, match="costs"):
        plan(_config({"type": "sklearn", "name": "wine"}, {"mlp": _mlp(13, 0.5)}, shards=1, batch_size=16,
                     costs={"cheapest_tied_by": "speed"}))
