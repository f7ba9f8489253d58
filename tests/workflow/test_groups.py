"""Independence groups declared in a workflow config: planned into the dataset identity, written into the protocol
artifact, forwarded to Separatix (group cross-validation) and to a config-declared custom metric, with the same
result as the in-process Benchmark on the same grouped dataset."""

from __future__ import annotations

import json
import os

import numpy as np

from vertebrae import BenchmarkDataset, DatasetIdentity
from vertebrae.core.artifacts import read_json_artifact
from vertebrae.core.identity import grouped_key
from vertebrae.planning import benchmarks_from_config, plan
from workflow_support import REPO, comparable, snakemake, write_config

N, N_GROUPS = 90, 6


def _data(tmp_path):
    rng = np.random.default_rng(11)
    classes = np.arange(N) % 3  # every site holds every class: group cross-validation has support
    X = rng.normal(size=(N, 5)) + 4.0 * np.eye(3, 5)[classes]
    labels = np.array(["cat", "dog", "fox"])[classes]
    sites = np.array([f"site-{i * N_GROUPS // N}" for i in range(N)])
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/grouped.npz", embeddings=X, labels=labels, site=sites)
    return X, labels, sites


def _config(groups_key="site"):
    source = {"type": "npz", "path": "data/grouped.npz"}
    if groups_key is not None:
        source["groups_key"] = groups_key
    return {
        "embedding": {"shards": 1, "batch_size": 128},
        "benchmarks": {
            "sites": {
                "dataset": {"source": source, "identity": {"kind": "declared", "name": "sites", "revision": "1"}},
                "extractors": {"raw": {"type": "precomputed"}},
                "scoring": {"k": 3},
                "separatix": {"enabled": True, "overlap_threshold": 0.0, "max_samples": 90},
                "metrics": [{"type": "callable", "path": "metric_fixtures:echo_inputs"}],
                # 3 classes: the comparison resamples rows (in partial jobs of 50, and in process); 20, not 200
                "row_resampling": {"resamples": 20},
            },
        },
    }


def _fingerprints(config, base_dir):
    """Fingerprints by stage; a score is planned as its merge job (``fanout: auto``, a metric is declared), whose
    partials are keyed by their own recipes ("labelled-partial")."""
    specs = plan(config, base_dir=base_dir).specs.values()
    stages = {"merge-labelled-partials": "score", "score-labelled-partial": "labelled-partial"}
    return {stage: {s["fingerprint"] for s in specs if stages.get(s["stage"], s["stage"]) == stage}
            for stage in ("protocol", "embed", "score", "labelled-partial", "report")}


def test_groups_from_config_through_snakemake_equal_in_process(tmp_path, monkeypatch):
    X, labels, sites = _data(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{REPO / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")  # jobs import the metric
    config = _config()
    write_config(tmp_path, config)

    # groups are part of the identity: every fingerprint of the grouped plan differs from the ungrouped one's
    grouped, ungrouped = _fingerprints(config, tmp_path), _fingerprints(_config(None), tmp_path)
    for stage in grouped:
        assert grouped[stage] and grouped[stage].isdisjoint(ungrouped[stage]), stage

    snakemake(tmp_path)
    protocol_fp, = grouped["protocol"]
    protocol = read_json_artifact(tmp_path / f"results/protocols/{protocol_fp}.json", "protocol", fingerprint=protocol_fp)
    assert protocol["groups"] == sites.tolist()  # the protocol artifact carries each row's group
    assert protocol["dataset_summary"]["identity"] == grouped_key("declared:sites@1", "site", sites.tolist())

    report = json.loads((tmp_path / "results/reports/sites/report.json").read_text())
    in_process = benchmarks_from_config(config, base_dir=tmp_path)["sites"]
    assert in_process.dataset.groups == tuple(sites.tolist())
    by_hand = BenchmarkDataset.from_embeddings(X, labels.tolist(), identity=DatasetIdentity.declared("sites", "1"))
    assert in_process.dataset.identity_key() == by_hand.with_groups(sites, name="site").identity_key()
    assert comparable(report) == comparable(in_process.run().to_dict())

    raw = report["extractor_results"][0]
    assert report["dataset_summary"]["groups"] == {"name": "site", "n_groups": N_GROUPS}
    seen = raw["metrics"]["echo_inputs"]["diagnostics"]
    assert seen["groups"] == sites.tolist() and seen["groups_type"] == "ndarray"  # the metric received the groups
    separatix = raw["separatix"]
    assert separatix["ran"] is True, separatix.get("skipped_reason")
    assert separatix["grouping"]["provided"] is True and separatix["grouping"]["group_count"] == N_GROUPS
    assert separatix["grouping"]["effective_supervised_evaluation_mode"] == "group_cross_validation"
    assert separatix["probe_summary"]["evaluation"]["group_aware"] is True

    score_fp, = grouped["score"]
    score = read_json_artifact(tmp_path / f"results/scores/{score_fp}.json", "score", fingerprint=score_fp)
    assert score["separatix"]["grouping"] == separatix["grouping"]
    assert score["metrics"]["echo_inputs"]["diagnostics"]["groups"] == sites.tolist()
