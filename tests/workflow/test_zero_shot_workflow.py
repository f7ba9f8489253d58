"""A zero-shot benchmark through Snakemake (config-declared `callable` extractor from a tiny module on PYTHONPATH,
raw and PCA-compressed variants) against the in-process ZeroShotBenchmark; then one prompt is edited and Snakemake's
own dry-run job table must show that only prompt-dependent jobs rerun."""

from __future__ import annotations

import csv
import json
import os
import textwrap

import numpy as np
import pytest

from vertebrae.planning import zero_shot_benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config

ENCODERS = textwrap.dedent('''
    import numpy as np

    CLASSES = ("alpha", "beta", "gamma")
    CENTERS = np.random.default_rng(7).normal(size=(3, 6))


    def samples(rows):
        return np.asarray(rows, dtype=np.float64)


    def texts(rows):
        out = np.zeros((len(rows), CENTERS.shape[1]))
        for i, text in enumerate(rows):
            for c, name in enumerate(CLASSES):
                if name in text:
                    out[i] += CENTERS[c]
            out[i, 0] += 0.05 * len(text.split())
        return out
''')

PROMPT_JOBS = {"plan_zero_shot", "embed_zero_shot_prompts", "merge_zero_shot", "write_zero_shot_protocol",
               "score_zero_shot", "plan", "compare", "report", "figures", "report_tables", "report_page",
               "leaderboard_page", "results_index", "summary", "all"}  # plan: compare's


def _config(prompts: list[dict]) -> dict:
    return {
        "embedding": {"shards": 2, "batch_size": 4},  # 5 prompts: 2 batches, so 2 shards
        "zero_shot": {
            "toy": {
                "dataset": {"source": {"type": "csv", "path": "data/toy.csv", "id_column": "id", "label_column": "label"},
                            "identity": {"kind": "declared", "name": "toy-zero-shot", "revision": "1"}},
                "prompts": prompts,
                "sample_branch": "image",
                "text_branch": "text",
                "extractors": {"toy": {"type": "callable", "cache_identity": "toy-v1",
                                       "branches": {"image": "zs_wf_encoders:samples", "text": "zs_wf_encoders:texts"}}},
                "compression": {"method": "pca", "n_components": 3},
                "zero_shot": {"top_k": [1, 2], "sample_batch_size": 7},
            },
        },
    }


@pytest.fixture
def toy_dir(tmp_path, monkeypatch):
    (tmp_path / "zs_wf_encoders.py").write_text(ENCODERS)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = np.random.default_rng(1)
    centers = np.random.default_rng(7).normal(size=(3, 6))
    y = rng.integers(0, 3, 90)
    X = centers[y] + 0.8 * rng.normal(size=(90, 6))
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data/toy.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", *[f"f{j}" for j in range(6)], "label"])
        for i in range(90):
            writer.writerow([f"s{i}", *X[i].tolist(), ("alpha", "beta", "gamma")[y[i]]])
    return tmp_path


def _report(workdir):
    return json.loads((workdir / "results/reports/toy/report.json").read_text())


def test_zero_shot_workflow_matches_in_process_and_prompt_edit_reruns_only_prompt_jobs(toy_dir):
    prompts = [{"label": "alpha", "texts": ["an alpha", "a photo of an alpha"]},
               {"label": "beta", "texts": ["a beta", "a photo of a beta"]},
               {"label": "gamma", "texts": ["a gamma"]}]
    config = _config(prompts)
    write_config(toy_dir, config)
    counts = job_counts(snakemake(toy_dir, "-n", "--quiet", "rules").stdout)
    assert counts["embed_zero_shot_samples"] == 2 and counts["embed_zero_shot_prompts"] == 2  # 5 prompts, 2 shards
    assert counts["compress_zero_shot"] == 1 and counts["score_zero_shot"] == 2
    snakemake(toy_dir)
    written = _report(toy_dir)
    expected = zero_shot_benchmarks_from_config(config, base_dir=toy_dir)["toy"].run().to_dict()
    assert comparable(written) == comparable(expected)  # raw and compressed variants alike
    names = [c["name"] for c in written["candidate_results"]]
    assert names == ["toy", "toy[pca_3]"]
    raw, compressed = written["candidate_results"]
    assert raw["zero_shot"]["metrics"]["accuracy"] > 0.6  # 3 classes: chance is 1/3
    assert compressed["compression_metadata"]["fit_side"] == "samples"
    assert compressed["zero_shot"]["metadata"]["compression_pair"] is not None
    assert written["dataset_summary"]["prompts"][1]["text"] == "a photo of an alpha"
    assert "| alpha | " in (toy_dir / "results/reports/toy/report.md").read_text()
    assert job_counts(snakemake(toy_dir, "-n", "--quiet", "rules").stdout) == {}  # nothing left to do

    prompts[2]["texts"] = ["a gamma", "a photo of a gamma"]  # edit one class's prompts
    write_config(toy_dir, config)
    counts = job_counts(snakemake(toy_dir, "-n", "--quiet", "rules").stdout)
    assert set(counts) <= PROMPT_JOBS, counts
    assert {"embed_zero_shot_samples", "compress_zero_shot"}.isdisjoint(counts)
    assert counts["merge_zero_shot"] == 1  # the prompts' merge only (one rule merges either side)
    assert counts["embed_zero_shot_prompts"] == 2 and counts["score_zero_shot"] == 2 and counts["report"] == 1
    assert counts["write_zero_shot_protocol"] == 1
    snakemake(toy_dir)
    rerun = _report(toy_dir)
    fresh = zero_shot_benchmarks_from_config(config, base_dir=toy_dir)["toy"].run().to_dict()
    assert comparable(rerun) == comparable(fresh)
    assert rerun["dataset_summary"]["prompt_counts"]["gamma"] == 2
    assert rerun["candidate_results"][0]["embedding_metadata"]["sample_fingerprint"] == \
        written["candidate_results"][0]["embedding_metadata"]["sample_fingerprint"]
