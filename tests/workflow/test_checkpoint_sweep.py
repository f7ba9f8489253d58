"""A checkpoint sweep through the workflow: two tiny checkpoints saved during training are two candidates
(net@1, net@2), each with the plain single-checkpoint candidate's fingerprints and score; report.json holds
the step series (score and interval per step) and the detail figure draws it; a third checkpoint file adds only its
own jobs (dry run, by rule and by fingerprint)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_support import REPO, dry_run_jobs, snakemake, write_config, written_report


def _config(extractors):
    return {
        "embedding": {"shards": 1, "batch_size": 16},
        "benchmarks": {"toy": {
            "dataset": {"source": {"type": "npz", "path": "data.npz"}, "identity": {"kind": "content"}},
            "extractors": extractors, "scoring": {"k": 2}, "row_resampling": {"mode": "class"},
        }},
    }


def test_checkpoint_sweep_reports_steps_and_a_new_checkpoint_adds_only_its_jobs(tmp_path, monkeypatch):
    from tiny_models import train_mlp_checkpoints

    from vertebrae.planning import benchmarks_from_config, plan

    X, labels = train_mlp_checkpoints(tmp_path / "ckpts", steps=(1, 2, 3))
    np.savez(tmp_path / "data.npz", embeddings=X, labels=labels)
    third = tmp_path / "ckpts" / "step_3.safetensors"
    held = third.rename(tmp_path / "held_back.safetensors")  # lands later
    monkeypatch.setenv("PYTHONPATH", str(REPO / "tests"))  # the jobs import tiny_models:make_mlp
    monkeypatch.chdir(tmp_path)
    net = {"type": "torch", "factory": "tiny_models:make_mlp", "device": "cpu"}
    config = _config({"net": {**net, "checkpoints": "ckpts/step_*.safetensors"}})
    write_config(tmp_path, config)
    snakemake(tmp_path)
    report = written_report(tmp_path, "toy")
    (series,) = report["metadata"]["checkpoints"]
    assert series["sweep"] == "net" and series["layer"] is None and series["metric"] == "overlap"
    scores = {c["name"]: c["primary_score"] for c in report["extractor_results"]}
    assert [(p["step"], p["candidate"]) for p in series["points"]] == [(1, "net@1"), (2, "net@2")]
    assert [p["score"] for p in series["points"]] == [scores["net@1"], scores["net@2"]]
    entries = {c["name"]: c for c in report["comparison"]["candidates"]}
    for point in series["points"]:  # the comparison's interval of each candidate
        assert point["interval_source"] == "comparison"
        assert (point["ci_low"], point["ci_high"]) == (entries[point["candidate"]]["ci_low"],
                                                       entries[point["candidate"]]["ci_high"])
        assert point["ci_low"] <= point["score"] <= point["ci_high"]
    assert (tmp_path / "results" / "reports" / "toy" / "detail.png").stat().st_size > 0
    assert "## Score against checkpoint step" in (tmp_path / "results" / "reports" / "toy" / "report.md").read_text()
    from vertebrae.stages.verify import verify

    assert verify(tmp_path / "results") == []  # report.json (its step series) and its figures check out
    # each checkpoint scored as the plain single-checkpoint candidate scores it (in process), under its fingerprints
    plain = _config({f"plain{s}": {**net, "weights": f"ckpts/step_{s}.safetensors"} for s in (1, 2)})
    oracle = benchmarks_from_config(plain, base_dir=tmp_path)["toy"].run()
    assert {c.name: c.primary_score for c in oracle.extractor_results} == {"plain1": scores["net@1"],
                                                                          "plain2": scores["net@2"]}
    swept = plan(config, base_dir=tmp_path)
    assert set(plan(plain, base_dir=tmp_path).fingerprints("score")) == set(swept.fingerprints("score"))
    # a new checkpoint lands: only its embed, merge and score run, then the report (and what reads it)
    held.rename(third)
    jobs = [(rule, out) for rule, outputs in dry_run_jobs(snakemake(tmp_path, "-n").stdout)
            for out in outputs]
    new = plan(_config({"plain3": {**net, "weights": "ckpts/step_3.safetensors"}}), base_dir=tmp_path)
    (embed_fp,), (score_fp,) = new.fingerprints("embed"), new.fingerprints("score")
    by_rule = {rule: [out for r, out in jobs if r == rule] for rule, _ in jobs}
    assert len(by_rule["embed_shard"]) == len(by_rule["merge_embeddings"]) == 1
    assert embed_fp in by_rule["embed_shard"][0] and by_rule["merge_embeddings"][0].endswith(f"{embed_fp}.h5")
    assert by_rule["score"] == [str(Path("results") / "scores" / f"{score_fp}.json")]
    old = set(swept.fingerprints("embed")) | set(swept.fingerprints("score")) | set(swept.fingerprints("protocol"))
    assert not [out for _, out in jobs if any(fp in out for fp in old)]  # nothing of the first two checkpoints reruns
    assert "write_protocol" not in by_rule and "embed_sweep_shard" not in by_rule
