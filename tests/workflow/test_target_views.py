"""Issue 46 parts 1-2 through Snakemake: a nuisance view and a two-level hierarchy over one tiny dataset, their
views report, and the dry run after adding a view: only its jobs, by rule and fingerprint."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re

import numpy as np
import overlapindex
import yaml
from sklearn.preprocessing import normalize

from vertebrae.core.labels import semantic_key
from vertebrae.planning.views import views_benchmarks_from_config
from workflow_support import dry_run_jobs, snakemake


def _data(root):
    rng = np.random.default_rng(46)
    species = np.repeat(np.arange(4), 10)  # ints: genus g0, g1 > species 0..3
    site = np.tile(np.array(["a", "b"]), 20)
    ids = np.array([f"r{i:02d}" for i in range(species.size)])
    task = rng.normal(size=(4, 4))[species] * 4 + rng.normal(size=(species.size, 4))
    site_emb = np.where(site == "a", 3.0, -3.0)[:, None] + rng.normal(size=(species.size, 4))
    np.savez(root / "data.npz", embeddings=task, labels=species, site=site, ids=ids)
    np.savez(root / "task.npz", emb=task, ids=ids)
    np.savez(root / "site.npz", emb=site_emb, ids=ids)
    with open(root / "parents.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerows([["child", "parent"], [0, "g0"], [1, "g0"], [2, "g1"], [3, "g1"]])
    return site_emb, site


def _config(**targets):
    return {"seed": 0, "embedding": {"shards": 1, "batch_size": 64},
            "benchmarks": {"toy": {
                "dataset": {"source": {"type": "npz", "path": "data.npz", "ids_key": "ids"},
                            "identity": {"kind": "declared", "name": "toy", "revision": "1"}},
                "extractors": {"task": {"type": "precomputed", "path": "task.npz", "key": "emb", "ids": "ids"},
                               "site": {"type": "precomputed", "path": "site.npz", "key": "emb", "ids": "ids"}},
                "scoring": {"k": 2}, "row_resampling": {"mode": "class"},
                "targets": {"species": {}, "site": {"key": "site", "role": "nuisance"}, **targets},
                "hierarchy": {"file": "parents.csv", "levels": ["genus", "leaf"]}}}}


def test_views_report_and_adding_a_view_reruns_only_its_jobs(tmp_path, monkeypatch):
    from vertebrae.planning.planner import plan

    site_emb, site = _data(tmp_path)
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(_config()), encoding="utf-8")
    target = "results/reports/toy/views.json"
    snakemake(tmp_path, target, "--configfile", "cfg.yaml")
    views = json.loads((tmp_path / target).read_text(encoding="utf-8"))
    assert views["primary"] == "species" and views["levels"] == ["genus", "leaf"]
    assert views["rankings"]["site"] == ["task", "site"]  # a nuisance: the least encoding first
    site_report = json.loads((tmp_path / "results/reports/toy@site/report.json").read_text(encoding="utf-8"))
    scored = {c["name"]: c for c in site_report["extractor_results"]}
    assert site_report["ranking"] == ["task", "site"]  # the nuisance view's own report: lowest first, and says so
    assert site_report["metadata"]["view"] == {"name": "site", "role": "nuisance", "better": "lower"}
    oracle = overlapindex.OverlapIndex(model_type="MiniBatchKMeans", kmeans_k=scored["site"]["overlap"]["k_per_class"],
                                       kmeans_kwargs={"random_state": 0}, offline_chunk_size=10000)
    oracle.fit(normalize(site_emb), np.array([semantic_key(s) for s in site.tolist()], dtype=object))
    assert views["table"]["site"]["site"] == scored["site"]["primary_score"] == float(oracle.index)
    assert views["table"]["task"]["leaf"] == views["table"]["task"]["species"]  # the leaf is the dataset's target
    # the in-process twin of the same config (ViewsBenchmark) gives the very same table
    monkeypatch.chdir(tmp_path)  # the config's paths are relative to the working directory
    config = yaml.safe_load((tmp_path / "cfg.yaml").read_text(encoding="utf-8"))
    in_process = views_benchmarks_from_config(config, base_dir=tmp_path)["toy"].run()
    assert in_process.summary["table"] == views["table"] and in_process.summary["rankings"] == views["rankings"]
    assert in_process.reports["site"].to_dict()["metadata"]["view"] == site_report["metadata"]["view"]
    from vertebrae.cli.commands import show

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        show("cfg.yaml")
    assert "labelled benchmark toy, view site (benchmarks.toy)" in printed.getvalue()  # a view, not a benchmark
    markdown = (tmp_path / "results/reports/toy/views.md").read_text(encoding="utf-8")
    assert "site (nuisance, lower is better)" in markdown and "Score by hierarchy level" in markdown
    assert (tmp_path / "results/reports/toy/views.png").read_bytes()[:4] == b"\x89PNG"

    # add a nuisance view read from a file aligned by id: only its protocol, scores, compare, report and the views job
    with open(tmp_path / "scanner.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["id", "label"], *[[f"r{i:02d}", f"s{i % 3}"] for i in range(40)]])
    (tmp_path / "cfg2.yaml").write_text(yaml.safe_dump(_config(scanner={"file": "scanner.csv", "role": "nuisance"})),
                                        encoding="utf-8")
    before, after = (plan(yaml.safe_load((tmp_path / name).read_text(encoding="utf-8")), base_dir=tmp_path)
                     for name in ("cfg.yaml", "cfg2.yaml"))  # as Snakemake reads them (keys sorted)
    new = {fp: s["stage"] for fp, s in after.specs.items() if fp not in before.specs}
    assert sorted(new.values()) == ["compare", "protocol", "report", "score", "score", "views"]
    jobs = dry_run_jobs(snakemake(tmp_path, target, "-n", "--configfile", "cfg2.yaml").stdout)
    rules = sorted(rule for rule, _ in jobs)
    assert rules == sorted(["compare", "report", "score", "score", "views_report", "write_protocol"]
                           + ["plan"] * len(new))
    for rule, outputs in jobs:
        fps = {m for o in outputs for m in re.findall(r"/([0-9a-f]{16})\.json$", o)}
        assert rule in ("report", "views_report") or fps <= set(new), (rule, outputs)


def test_adding_a_hierarchy_level_plans_only_its_jobs(tmp_path, monkeypatch):
    """The plan before and after a hierarchy (its genus level new; its leaf is the dataset's own species view):
    the new job specs are the level's protocol, its two scores, compare and report, and the views job."""
    from vertebrae.planning.planner import plan

    _data(tmp_path)
    monkeypatch.chdir(tmp_path)  # the config's paths are relative to the working directory
    without = _config()
    del without["benchmarks"]["toy"]["hierarchy"]
    before, after = plan(without, base_dir=tmp_path), plan(_config(), base_dir=tmp_path)
    new = sorted(s["stage"] for fp, s in after.specs.items() if fp not in before.specs)
    assert new == ["compare", "protocol", "report", "score", "score", "views"]
    gone = sorted(s["stage"] for fp, s in before.specs.items() if fp not in after.specs)
    assert gone == ["views"]  # the views job's inputs grew: it alone is rewritten
