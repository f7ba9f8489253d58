"""Checkpoint sweeps (``vertebrae.extractors.checkpoints``): one candidate per checkpoint, each exactly the
single-checkpoint candidate (same declaration, same fingerprint), refusals at validate time naming key and value,
the step series a report draws, and the Python face (``CheckpointSweep``) scoring each checkpoint as the plain
candidate scores it."""

from __future__ import annotations


import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.extractors.checkpoints import (
    checkpoint_series,
    checkpoint_step,
    expand_checkpoint_sweeps,
)
from vertebrae.extractors.registry import build_extractor
from vertebrae.planning.config import validate_config
from vertebrae.stages.common import embedding_recipe
from tiny_models import train_mlp_checkpoints

STEPS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    X, labels = train_mlp_checkpoints(root / "ckpts", STEPS)
    return root, X, labels


def _net(root, **extra):
    return {"type": "torch", "factory": "tiny_models:make_mlp", "device": "cpu",
            "checkpoints": str(root / "ckpts" / "step_*.safetensors"), **extra}


def test_each_checkpoint_is_exactly_the_single_checkpoint_candidate(run):
    root, _, _ = run
    out = expand_checkpoint_sweeps({"raw": {"type": "precomputed"}, "net": _net(root)}, where="b.extractors")
    assert list(out) == ["raw", "net@1", "net@2", "net@3", "net@4"]
    for step in STEPS:
        single = {"type": "torch", "factory": "tiny_models:make_mlp", "device": "cpu",
                  "weights": str(root / "ckpts" / f"step_{step}.safetensors")}
        assert out[f"net@{step}"] == single

        def fp(decl):
            return fingerprint("embedding", embedding_recipe("declared:x@1", "samples", build_extractor("e", decl, where="w")))

        assert fp(out[f"net@{step}"]) == fp(single)
    assert fp(out["net@1"]) != fp(out["net@2"])  # the weights' content is in the fingerprint
    # steps from metadata (the safetensors header's "step"), and from a regex; through validate_config as the workflow
    meta = expand_checkpoint_sweeps({"net": _net(root, step_from="metadata")}, where="b")
    assert list(meta) == ["net@100", "net@200", "net@300", "net@400"]
    listed = _net(root, step_from=r"step_(\d)\.", checkpoints=[str(root / "ckpts" / "step_2.safetensors"),
                                                                 str(root / "ckpts" / "step_[13].safetensors")])
    assert list(expand_checkpoint_sweeps({"n": listed}, where="b")) == ["n@1", "n@2", "n@3"]
    config = validate_config({"benchmarks": {"toy": {"dataset": {"source": {"type": "npz", "path": "d.npz"}},
                                                     "extractors": {"net": _net(root)}}}})
    assert list(config["benchmarks"]["toy"]["extractors"]) == ["net@1", "net@2", "net@3", "net@4"]


def test_default_step_is_the_last_integer_in_the_path():
    assert checkpoint_step("runs/v2/step_1000.safetensors", None, where="k") == 1000
    assert checkpoint_step("runs/checkpoint-500/", None, where="k") == 500
    assert checkpoint_step("runs/7/model.safetensors", None, where="k") == 7
    assert checkpoint_step("epoch=3-step=120.ckpt", r"step=(\d+)", where="k") == 120


def test_bad_sweeps_are_refused_naming_key_and_value(run, tmp_path):
    root, _, _ = run
    where = "benchmarks.b.extractors"

    def expand(decl):
        return expand_checkpoint_sweeps({"net": decl}, where=where)

    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: the glob '.*nothing_\*\.pt' matches no file"):
        expand(_net(root, checkpoints=str(root / "nothing_*.pt")))
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints\[1\]: checkpoint not found: '.*gone\.pt'"):
        expand(_net(root, checkpoints=[str(root / "ckpts" / "step_1.safetensors"), str(root / "gone.pt")]))
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: 'epoch_\(\\d\+\)' does not match the checkpoint "
                                          r"path '.*step_1\.safetensors'"):
        expand(_net(root, step_from=r"epoch_(\d+)"))
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: 'step_\(' is not a regular expression"):
        expand(_net(root, step_from="step_("))
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: 'ckpts' reads 'ckpts' from '.*', not a step"):
        expand(_net(root, step_from="ckpts"))
    twin = tmp_path / "other"
    twin.mkdir()
    (twin / "step_1.safetensors").write_bytes((root / "ckpts" / "step_1.safetensors").read_bytes())
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: '.*ckpts/step_1\.safetensors' and "
                                          r"'.*other/step_1\.safetensors' are both step 1"):
        expand(_net(root, checkpoints=[str(root / "ckpts" / "step_1.safetensors"), str(twin / "step_1.safetensors")]))
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: a checkpoint sweep takes an extractor of a family "
                                          r"that loads local weights \(torch, timm, .*\), not type 'precomputed'"):
        expand({"type": "precomputed", "checkpoints": str(root / "ckpts" / "*")})
    with pytest.raises(ConfigError, match=r"extractors\.net\.weights: '.*' beside checkpoints"):
        expand(_net(root, weights=str(root / "ckpts" / "step_1.safetensors")))
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: reads the steps of checkpoints, but no"):
        expand({"type": "torch", "factory": "tiny_models:make_mlp", "step_from": "metadata"})
    # a checkpoint of another architecture: refused naming the file and the first misfit, before anything runs
    from safetensors.torch import save_file
    from tiny_models import make_mlp

    save_file(make_mlp(9).state_dict(), str(tmp_path / "step_9.safetensors"))
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: .*step_9\.safetensors does not fit the module "
                                          r"tiny_models:make_mlp builds: 1 of another shape \(first: 0\.weight: \[16, 9\] "
                                          r"in the file, \[16, 8\] in the module\)"):
        expand(_net(root, checkpoints=[str(root / "ckpts" / "step_1.safetensors"), str(tmp_path / "step_9.safetensors")]))
    import torch

    torch.save({"model": make_mlp().state_dict(), "step": 3}, tmp_path / "full_3.pt")  # a training checkpoint
    with pytest.raises(ConfigError, match=r"full_3\.pt is not a state dict"):
        expand(_net(root, checkpoints=str(tmp_path / "full_*.pt")))
    for step, width in ((1, 8), (2, 8), (3, 9)):  # hf folders: each checkpoint's tensors as the first one's
        (tmp_path / "hf" / f"checkpoint-{step}").mkdir(parents=True)
        save_file(make_mlp(width).state_dict(), str(tmp_path / "hf" / f"checkpoint-{step}" / "model.safetensors"))
    assert list(expand({"type": "hf_text", "checkpoints": str(tmp_path / "hf" / "checkpoint-[12]")})) == ["net@1",
                                                                                                        "net@2"]
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: .*checkpoint-3 does not fit the sweep's first "
                                          r"checkpoint .*checkpoint-1: 1 of another shape \(first: model\.safetensors:"
                                          r"0\.weight: \[16, 9\] in the file, \[16, 8\] in .*checkpoint-1\)"):
        expand({"type": "hf_text", "checkpoints": str(tmp_path / "hf" / "checkpoint-*")})
    torch.save({k: v for k, v in make_mlp().state_dict().items() if k != "3.bias"}, tmp_path / "part_4.pt")
    with pytest.raises(ConfigError, match=r"part_4\.pt does not fit .*1 tensor\(s\) missing \(first: 3\.bias\)"):
        expand(_net(root, checkpoints=str(tmp_path / "part_*.pt")))


def test_step_series_find_checkpoints_and_layer_grids():
    def timm(path, layer=None):
        return {"type": "timm", "checkpoint": path, "pooling": "tokens_mean",
                **({} if layer is None else {"hidden_layer": layer})}

    grid = {f"vit@{s}@{l}": timm(f"c/{s}", l) for s in (10, 20) for l in (2, 4)}
    layers_only = {"vit@1": timm("c/only", 1), "vit@2": timm("c/only", 2)}  # a layer sweep: no step series
    other = {"net@5": {"type": "torch", "factory": "m:f", "weights": "w5"}}  # one point: no series
    series = checkpoint_series({**grid, **layers_only, **other})
    assert series == [{"sweep": "vit", "layer": 2, "points": [{"step": 10, "candidate": "vit@10@2"},
                                                              {"step": 20, "candidate": "vit@20@2"}]},
                      {"sweep": "vit", "layer": 4, "points": [{"step": 10, "candidate": "vit@10@4"},
                                                              {"step": 20, "candidate": "vit@20@4"}]}]


def test_the_docs_snippet_scores_each_checkpoint_as_the_plain_candidate(tmp_path, monkeypatch):
    """docs/models.md's CheckpointSweep block, as written, on checkpoints of a tiny MLP (mypkg.model:build) and 10
    separated classes (paired over classes: no row-resampled comparison)."""
    from docs_support import block

    from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity
    from vertebrae.reports.figures import report_figures
    from vertebrae.reports.steps import with_step_definitions, with_step_series

    train_mlp_checkpoints(tmp_path / "runs" / "a", (1, 2))
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "model.py").write_text("from tiny_models import make_mlp as build\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    classes = np.repeat(np.arange(10), 6)
    X = (rng.normal(size=(10, 8)) * 3)[classes] + rng.normal(size=(60, 8)) * 0.3
    dataset = BenchmarkDataset.from_arrays(X.astype(np.float32), np.array([f"c{c}" for c in classes]),
                                           identity=DatasetIdentity.declared("runs", "1"))
    namespace = {"dataset": dataset}
    exec(compile(block("docs/models.md", "Models", "python", 2), "docs/models.md", "exec"), namespace)
    sweep, result, (series,) = namespace["sweep"], namespace["result"], namespace["series"]
    assert sweep.steps == {"net@1": 1, "net@2": 2} and (tmp_path / "steps.png").stat().st_size > 0
    scores = {c.name: c.primary_score for c in result.extractor_results}
    assert [(p["step"], p["score"]) for p in series["points"]] == [(1, scores["net@1"]), (2, scores["net@2"])]
    entries = {c["name"]: c for c in result.comparison.to_dict()["candidates"]}
    assert all((p["ci_low"], p["ci_high"]) == (entries[p["candidate"]]["ci_low"], entries[p["candidate"]]["ci_high"])
               for p in series["points"])
    plain = build_extractor("plain", {"type": "torch", "factory": "mypkg.model:build",
                                      "weights": "runs/a/step_2.safetensors"}, where="p")
    (alone,) = Benchmark(dataset, [plain], name="runs").run().extractor_results
    assert alone.primary_score == scores["net@2"] and 0 < alone.primary_score <= 1
    # the report's own path: definitions in its metadata, numbers once the comparison is attached, the detail
    # figure's step panel beside the per-class heat map
    report = with_step_series(with_step_definitions(result, sweep.definitions()))
    document = report.to_dict()
    assert document["metadata"]["checkpoints"] == [series]
    section = report.markdown().split("## Score against checkpoint step", 1)[1]
    assert "| net | 2 | net@2 |" in section.split("\n## ", 1)[0]
    detail = report_figures(document, name="runs")["detail"]
    assert "training step" in [ax.get_xlabel() for ax in detail.axes]


def test_a_layer_by_step_grid_is_one_forward_pass_per_checkpoint(tmp_path, monkeypatch):
    """hidden_layers x checkpoints on a tiny timm ViT: NAME@STEP@LAYER candidates; the plan embeds the layers of ONE
    checkpoint in one embed-sweep job per shard, and the report spec holds one step series per layer."""
    import tiny_models

    from vertebrae.planning import plan

    for step, seed in ((1, 0), (2, 1)):  # two save_for_hf folders of one architecture, other weights
        tiny_models.build_timm(tmp_path / "ckpts" / f"step_{step}", seed=seed)
    tiny_models.write_images(tmp_path / "images", 4)
    (tmp_path / "images.csv").write_text(
        "image,label,id\n" + "".join(f"images/img_{i:03d}.png,{'ab'[i % 2]},i{i}\n" for i in range(4)))
    monkeypatch.chdir(tmp_path)
    config = {"benchmarks": {"pics": {
        "dataset": {"source": {"type": "manifest", "path": "images.csv", "image_column": "image", "id_column": "id"},
                    "identity": {"kind": "declared", "revision": "1", "name": "pics"}},
        "extractors": {"vit": {"type": "timm", "checkpoints": "ckpts/step_*/", "hidden_layers": [0, 1],
                               "device": "cpu"}}}}}
    result = plan(config)
    report = result.spec(result.reports["pics"])
    assert [c["name"] for c in report["candidates"]] == ["vit@1@0", "vit@1@1", "vit@2@0", "vit@2@1"]
    sweeps = [result.spec(fp) for fp in result.fingerprints("embed-sweep")]
    assert len(sweeps) == 2
    for sweep in sweeps:  # one job per checkpoint, its two layers
        assert [layer["layer"] for layer in sweep["layers"]] == [0, 1]
        assert len({layer["extractor"]["decl"]["checkpoint"] for layer in sweep["layers"]}) == 1
    assert report["checkpoints"] == [
        {"sweep": "vit", "layer": layer, "points": [{"step": 1, "candidate": f"vit@1@{layer}"},
                                                    {"step": 2, "candidate": f"vit@2@{layer}"}]} for layer in (0, 1)]
