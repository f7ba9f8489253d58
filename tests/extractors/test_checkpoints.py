"""Checkpoint sweeps (``vertebrae.extractors.checkpoints``): one candidate per checkpoint, each exactly the
single-checkpoint candidate (same declaration, same fingerprint), refusals at validate time naming key and value,
the step series a report draws, and the Python face (``CheckpointSweep``) scoring each checkpoint as the plain
candidate scores it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.extractors.checkpoints import (
    CheckpointSweep,
    checkpoint_series,
    checkpoint_step,
    expand_checkpoint_sweeps,
)
from vertebrae.extractors.registry import build_extractor
from vertebrae.planning.config import validate_config
from vertebrae.stages.common import embedding_recipe

STEPS = (1, 2, 3, 4)


def train_checkpoints(folder, steps=STEPS, *, width: int = 8):
    """A tiny MLP (tiny_models.make_mlp) trained by SGD on 3 separable-ish classes, its state dict saved after each
    step as ``folder/step_{N}.safetensors``; returns (rows, labels)."""
    import torch
    from safetensors.torch import save_file
    from tiny_models import make_mlp

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 16)
    X = rng.normal(size=(len(y), width)).astype(np.float32)
    X[:, 0] += 1.2 * y
    module = make_mlp(width)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    for step in range(1, max(steps) + 1):
        loss = torch.nn.functional.cross_entropy(module(torch.from_numpy(X)), torch.from_numpy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in steps:
            save_file(module.state_dict(), str(folder / f"step_{step}.safetensors"), metadata={"step": str(step * 100)})
    return X, np.array(["a", "b", "c"])[y]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    X, labels = train_checkpoints(root / "ckpts")
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
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: 'epoch_\(\[0-9\]\+\)' does not match the checkpoint "
                                          r"path '.*step_1\.safetensors'"):
        expand(_net(root, step_from="epoch_([0-9]+)"))
    with pytest.raises(ConfigError, match=r"extractors\.net\.step_from: 'ckpts' reads 'ckpts' from '.*', not a step"):
        expand(_net(root, step_from="ckpts"))
    twin = tmp_path / "other"
    twin.mkdir()
    (twin / "step_1.safetensors").write_bytes((root / "ckpts" / "step_1.safetensors").read_bytes())
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: '.*ckpts/step_1\.safetensors' and "
                                          r"'.*other/step_1\.safetensors' are both step 1"):
        expand(_net(root, checkpoints=[str(root / "ckpts" / "step_1.safetensors"), str(twin / "step_1.safetensors")]))
    with pytest.raises(ConfigError, match=r"extractors\.net\.checkpoints: type 'precomputed' loads no local weights"):
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


def test_python_sweep_scores_each_checkpoint_as_the_plain_candidate(run):
    from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity
    from vertebrae.reports.steps import step_figure, step_series

    root, X, labels = run
    decl = {k: v for k, v in _net(root).items() if k != "checkpoints"}
    sweep = CheckpointSweep("net", decl, str(root / "ckpts" / "step_*.safetensors"))
    assert sweep.steps == {f"net@{s}": s for s in STEPS}
    plain = build_extractor("plain", {**decl, "weights": str(root / "ckpts" / "step_3.safetensors")}, where="p")
    dataset = BenchmarkDataset.from_arrays(X, labels, identity=DatasetIdentity.declared("toy", "1"))
    from vertebrae.scoring.paired.rows import RowResamplingConfig

    # paired over the 3 classes (no row-resampled comparison: 200 OverlapIndex fits a candidate)
    result = Benchmark(dataset, [*sweep, plain], name="toy", row_resampling=RowResamplingConfig(mode="class")).run()
    (series,) = step_series(result.to_dict(), sweep)
    scores = {c.name: c.primary_score for c in result.extractor_results}
    assert [p["step"] for p in series["points"]] == list(STEPS)
    assert [p["score"] for p in series["points"]] == [scores[f"net@{s}"] for s in STEPS]
    assert series["points"][2]["score"] == scores["plain"] and all(math.isfinite(scores[n]) for n in scores)
    figure = step_figure([series])
    assert figure.axes[0].get_legend_handles_labels()[1] == ["net"]
    assert figure.axes[0].get_xlabel() == "training step"
