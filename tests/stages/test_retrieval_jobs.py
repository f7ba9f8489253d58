"""The retrieval protocol's jobs through the CLI in a temporary working directory, with workflow plan specs: the
artifact report equals the in-process RetrievalBenchmark, and ``vertebrae report`` writes the very bytes
``retrieval-from-artifacts`` writes."""

from __future__ import annotations

import json

import numpy as np

from vertebrae.cli import main
from vertebrae.planning import plan, retrieval_benchmarks_from_config
from vertebrae.planning.paths import artifact_path
from workflow_support import comparable

CONFIG = {
    "embedding": {"shards": 2, "batch_size": 8},
    "retrieval": {"pairs": {
        "dataset": {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
                    "identity": {"kind": "declared", "name": "pairs", "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"},
                       "pca4": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                              "params": {"n_components": 4}}]}},
        "compression": {"method": "quantize", "precision": "int8"},
    }},
}


def _write_data() -> None:
    rng = np.random.default_rng(1)
    gallery = rng.normal(size=(30, 6)).astype(np.float32)
    targets = rng.integers(0, 30, size=20)
    queries = (gallery[targets] + 0.3 * rng.normal(size=(20, 6))).astype(np.float32)
    np.savez("pair.npz", queries=queries, gallery=gallery, query_ids=np.array([f"q{i}" for i in range(20)]),
             gallery_ids=np.array([f"g{i}" for i in range(30)]))
    with open("qrels.tsv", "w", encoding="utf-8") as handle:
        handle.write("".join(f"q{i}\tg{t}\t1\n" for i, t in enumerate(targets)))


def _cli(*argv: str) -> None:
    assert main([str(a) for a in argv]) == 0, argv


def test_the_cli_chain_equals_the_in_process_benchmark_and_report_serves_retrieval_plans(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_data()
    p = plan(CONFIG)
    for fp in p.specs:
        _cli("plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp))
    for fp in p.fingerprints("fit"):
        _cli("fit-extractor", "--plan-json", p.plan_path(fp), "--output", artifact_path("fitted", fp))
    for fp in p.fingerprints("embed"):
        side = p.spec(fp)["side"]
        for i, shard in enumerate(p.shard_paths(fp)):
            _cli("embed-retrieval-shard", "--plan-json", p.plan_path(fp), "--side", side, "--shard-index", i,
                 "--output", shard)
        _cli("merge-retrieval-embeddings", "--plan-json", p.plan_path(fp), "--output",
             artifact_path("embedding", fp, protocol="retrieval"), *p.shard_paths(fp))
    for fp in p.fingerprints("retrieval-protocol"):
        _cli("write-retrieval-relevance", "--plan-json", p.plan_path(fp), "--output",
             artifact_path("protocol", fp, protocol="retrieval"))
    for fp in p.fingerprints("compress-retrieval"):
        spec = p.spec(fp)
        _cli("compress-retrieval", "--plan-json", p.plan_path(fp), "--queries", spec["query"]["path"], "--gallery",
             spec["gallery"]["path"], "--query-output", artifact_path("compressed", fp, protocol="retrieval", side="query"),
             "--gallery-output", artifact_path("compressed", fp, protocol="retrieval", side="gallery"))
    for fp in p.fingerprints("score-retrieval"):
        spec = p.spec(fp)
        _cli("score-retrieval", "--plan-json", p.plan_path(fp), "--queries", spec["query"]["path"], "--gallery",
             spec["gallery"]["path"], "--protocol", spec["protocol"]["path"], "--output", artifact_path("score", fp, protocol="retrieval"))
    report_fp = p.retrieval_reports["pairs"]
    spec = p.spec(report_fp)
    scores = [c["score"]["path"] for c in spec["candidates"]]
    common = ("--plan-json", p.plan_path(report_fp), "--protocol", spec["protocol"]["path"])
    _cli("retrieval-from-artifacts", *common, "--json-output", "a.json", "--markdown-output", "a.md", *scores)
    compare_fp = p.comparisons[report_fp]
    _cli("compare", "--plan-json", p.plan_path(compare_fp), "--report-plan", p.plan_path(report_fp), "--protocol",
         spec["protocol"]["path"], "--output", "cmp.json", *scores)
    _cli("report", *common, "--comparison", "cmp.json", "--json-output", "b.json", "--markdown-output", "b.md", *scores)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.md").read_bytes() == (tmp_path / "b.md").read_bytes()
    written = json.loads((tmp_path / "a.json").read_text())
    expected = retrieval_benchmarks_from_config(CONFIG)["pairs"].run().to_dict()
    assert comparable(written) == comparable(expected)
    assert [c["name"] for c in written["candidate_results"]] == ["raw", "raw[quantize_int8]", "pca4", "pca4[quantize_int8]"]

