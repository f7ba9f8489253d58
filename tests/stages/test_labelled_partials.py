"""A labelled score part by part (issue 29, item 3): each part keyed by its own config alone, and the parts merged
into exactly the payload the one score job computes; a partial computed from other contents is refused."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from vertebrae.core.artifacts import read_json_artifact, write_embeddings, write_json_artifact
from vertebrae.core.errors import StaleArtifactError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.scoring.few_shot import FewShotMetric
from vertebrae.scoring.knn import KNNMetric
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.scoring.separatix import SeparatixConfig
from vertebrae.scoring.stability import StabilityConfig
from vertebrae.stages.common import EmbeddingBlock
from vertebrae.stages.labelled import ScoringPlan, build_protocol, score_embeddings
from vertebrae.stages.labelled_partials import (KIND, compute_part, fanout_specs, merge_parts, part_name,
                                                part_recipes, run_merge_partials, run_score_partial)
from vertebrae.stages.plan import run_plan
from workflow_support import comparable

N_PER_CLASS = 20


@pytest.fixture(scope="module")
def dataset() -> BenchmarkDataset:
    rng = np.random.default_rng(29)
    centres = np.eye(3) * 4.0
    X = np.vstack([rng.normal(size=(N_PER_CLASS, 3)) + c for c in centres])
    labels = ["a"] * N_PER_CLASS + ["b"] * N_PER_CLASS + ["c"] * N_PER_CLASS
    return BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("toy", "1"),
                                            row_ids=[f"r{i}" for i in range(3 * N_PER_CLASS)])


PLAN = ScoringPlan(OverlapScoringConfig(k=2), seed=3, metrics=(KNNMetric(k=5, folds=2),),
                   stability=StabilityConfig(mode="subsample", repeats=3, subsample_fraction=0.8),
                   separatix=SeparatixConfig(max_samples=60, budget="fast"))


def _fps(plan: ScoringPlan) -> dict[str, str]:
    return {part_name(r): fingerprint(KIND, r) for r in part_recipes("e" * 16, "p" * 16, plan)}


def test_each_part_is_keyed_by_its_own_config_alone():
    base = _fps(PLAN)
    knn = ["metric knn fold 0", "metric knn fold 1"]  # kNN runs fold by fold (KNNMetric.job_folds)
    assert list(base) == ["overlap", "stability[0]", "stability[1]", "stability[2]", *knn, "separatix"]
    added = _fps(replace(PLAN, metrics=PLAN.metrics + (FewShotMetric(shots=(1,), episodes=3),)))
    assert {k: v for k, v in added.items() if k != "metric few_shot"} == base  # adding a metric: only its part
    changed = _fps(replace(PLAN, metrics=(KNNMetric(k=7, folds=2),)))
    assert [k for k in base if changed[k] != base[k]] == knn
    more = _fps(replace(PLAN, stability=replace(PLAN.stability, repeats=4, interval_level=0.9)))
    assert {k: more[k] for k in base} == base  # more repeats (another interval): the earlier repeats stand
    overlap = _fps(replace(PLAN, scoring=OverlapScoringConfig(k=3)))
    assert [k for k in base if overlap[k] == base[k]] == knn  # Separatix is gated by the overlap score
    assert _fps(replace(PLAN, seed=4))["stability[0]"] != base["stability[0]"]


def test_parts_merge_to_the_one_job_payload(dataset):
    protocol = build_protocol(dataset)
    block = EmbeddingBlock(dataset.inputs, dataset.row_ids)
    expected = score_embeddings(block, protocol, PLAN)
    parts, overlap = [], None
    for recipe in part_recipes("e" * 16, "p" * 16, PLAN):
        result = compute_part(recipe, block, protocol, "classification", overlap)
        result = json.loads(json.dumps(result))  # as a partial artifact holds it
        overlap = result if recipe["part"] == "overlap" else overlap
        parts.append((recipe, {"result": result, "embedding_metadata": block.metadata(), "compression_metadata": None}))
    merged = merge_parts(PLAN, parts, protocol)
    assert merged.pop("compression_metadata") is None
    assert merged["separatix"]["ran"] and len(merged["stability"]["scores"]) == 3 and "knn" in merged["metrics"]
    # equal, but for Separatix's wall-clock timings
    assert comparable(merged) == comparable(json.loads(json.dumps(expected)))


def test_merge_refuses_a_partial_of_other_contents(tmp_path, dataset, monkeypatch):
    from vertebrae.core import throughput

    clock = iter(range(1, 100))  # each job's age when it writes: 1 s, 2 s, ... (the merge's is the last)
    monkeypatch.setattr(throughput, "process_age_seconds", lambda: float(next(clock)))
    plan = replace(PLAN, separatix=None, stability=None)
    protocol = build_protocol(dataset)
    embedding = tmp_path / "emb.h5"
    write_embeddings(embedding, dataset.inputs, list(dataset.row_ids), fingerprint="e" * 16, recipe={})
    protocol_path = tmp_path / "protocol.json"
    write_json_artifact(protocol_path, "protocol", protocol.to_payload(), fingerprint="p" * 16, recipe={})
    score = {"stage": "score", "recipe": {"x": 1}, "fingerprint": fingerprint("score", {"x": 1}),
             "embedding": {"fingerprint": "e" * 16, "path": str(embedding)},
             "protocol": {"fingerprint": "p" * 16, "path": str(protocol_path)}, "plan": plan.to_dict(),
             "target_type": "classification"}
    partials, merge = fanout_specs(score, plan, lambda fp: str(tmp_path / "partials" / f"{fp}.json"))
    for spec in [*partials, merge]:
        run_plan(json.dumps(spec), tmp_path / "plans" / f"{spec['fingerprint']}.json")
    for spec in partials:
        run_score_partial(tmp_path / "plans" / f"{spec['fingerprint']}.json", embedding, protocol_path,
                          tmp_path / "partials" / f"{spec['fingerprint']}.json")
    merge_plan = tmp_path / "plans" / f"{merge['fingerprint']}.json"
    out = tmp_path / "score.json"
    run_merge_partials(merge_plan, embedding, protocol_path, out)
    block = EmbeddingBlock(dataset.inputs, dataset.row_ids)
    expected = {**score_embeddings(block, protocol, plan), "compression_metadata": None,
                "embedding_throughput": [None]}  # no embed job wrote this embedding: its cost is unknown
    assert read_json_artifact(out, "score", fingerprint=merge["fingerprint"]) == json.loads(json.dumps(expected))
    # its seconds, in no hash: every partial job's (each in its own manifest) and the merge's own, summed
    from vertebrae.core.artifacts import read_json_document

    parts = [read_json_document(tmp_path / "partials" / f"{spec['fingerprint']}.json", KIND, fingerprint=None)[0]
             ["metadata"]["job_costs"]["score_seconds"] for spec in partials]
    assert parts == [float(i) for i in range(1, len(partials) + 1)]
    costs = read_json_document(out, "score", fingerprint=None)[0]["metadata"]["job_costs"]
    assert costs == {"peak_mb": None, "score_seconds": sum(parts) + len(partials) + 1}  # no embed job: peak unknown
    # the embedding rewritten with other values under the same fingerprint: every partial is stale
    write_embeddings(embedding, dataset.inputs * 2.0, list(dataset.row_ids), fingerprint="e" * 16, recipe={})
    with pytest.raises(StaleArtifactError, match="stale labelled partial: computed from other embedding"):
        run_merge_partials(merge_plan, embedding, protocol_path, out)


def test_row_resamples_run_in_blocks_that_merge_to_the_one_job_and_stand_when_more_are_asked(dataset):
    from vertebrae.scoring.paired.rows import RowResamplingConfig
    from vertebrae.stages.labelled_partials import ROW_RESAMPLES_PER_JOB

    size = ROW_RESAMPLES_PER_JOB
    plan = ScoringPlan(OverlapScoringConfig(k=2), seed=3,
                       row_resampling=RowResamplingConfig(mode="rows", resamples=2 * size + 7, fraction=0.5))
    recipes = part_recipes("e" * 16, "p" * 16, plan)
    assert [part_name(r) for r in recipes] == ["overlap", f"row-resamples[0:{size}]",
                                               f"row-resamples[{size}:{2 * size}]",
                                               f"row-resamples[{2 * size}:{2 * size + 7}]"]
    protocol = build_protocol(dataset)
    block = EmbeddingBlock(dataset.inputs, dataset.row_ids)
    parts = [(r, {"result": json.loads(json.dumps(compute_part(r, block, protocol, "classification"))),
                  "embedding_metadata": block.metadata(), "compression_metadata": None}) for r in recipes]
    merged = merge_parts(plan, parts[:1] + parts[:0:-1])  # blocks merge by position, whatever their order
    expected = json.loads(json.dumps(score_embeddings(block, protocol, plan)))
    assert len(expected["row_resamples"]["scores"]) == 2 * size + 7
    assert json.loads(json.dumps(merged))["row_resamples"] == expected["row_resamples"]
    more = replace(plan, row_resampling=replace(plan.row_resampling, resamples=3 * size))
    before = [fingerprint(KIND, r) for r in recipes]
    after = [fingerprint(KIND, r) for r in part_recipes("e" * 16, "p" * 16, more)]
    assert after[:3] == before[:3] and after[3] != before[3] and len(after) == 4  # full blocks stand
