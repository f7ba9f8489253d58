"""A config is data (issue 32, item 3): ``vertebrae run/status/show/validate`` refuse Snakemake's YTE templating
(``__use_yte__``, which runs Python from the file) and YAML aliases that expand past a small bound, before Snakemake
reads the file; ordinary anchors and merge keys still load."""

from __future__ import annotations

import time

import pytest
import yaml

from vertebrae.cli import main
from vertebrae.planning.config import MAX_EXPANDED_NODES, load_config_file
from workflow_support import USER_CONFIG


def _bomb(levels: int = 8) -> str:
    """Eight nested aliases of ten items each: 10^8 strings once expanded (a few hundred bytes of YAML)."""
    lines = ["a: &a [" + ", ".join(["x"] * 10) + "]"]
    for prev, name in zip("abcdefgh", "bcdefghi"[:levels]):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n"


# YTE evaluates a value starting with `?` as Python: this one writes a marker file beside the config
YTE = "__use_yte__: true\nseed: 0\nmarker: ?__import__('pathlib').Path('MARKER').write_text('ran')\n"
FILES = {"yte": (YTE, "__use_yte__"), "alias-bomb": (_bomb(), "alias"), "recursive": ("a: &a [1, *a]\n", "alias")}


@pytest.mark.parametrize("command", [["run", "{}", "-n"], ["validate", "{}"], ["status", "{}"], ["show", "{}"]],
                         ids=["run", "validate", "status", "show"])
@pytest.mark.parametrize("case", sorted(FILES))
def test_the_user_commands_refuse_code_and_alias_bombs_before_snakemake(tmp_path, monkeypatch, capsys, command, case):
    text, word = FILES[case]
    (tmp_path / "cfg.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    status = main([arg.format("cfg.yaml") for arg in command])
    err = capsys.readouterr().err
    assert status == 2 and "cfg.yaml" in err and word in err and "a config is data" in err, err
    assert time.perf_counter() - start < 5
    assert not (tmp_path / "MARKER").exists()
    assert not (tmp_path / ".snakemake").exists()  # Snakemake never started


def test_the_bound_admits_real_configs_with_anchors_and_merge_keys(tmp_path):
    text = yaml.safe_dump({"seed": 0, "embedding": {"batch_size": 150}}) + (
        "base: &base {k: 5, seed: 0}\nbenchmarks:\n  a: {<<: *base, k: 3}\n  b: *base\n"
        "list: &l [" + ", ".join(["1"] * 100) + "]\nmore: [" + ", ".join(["*l"] * 100) + "]\n")
    path = tmp_path / "ok.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_config_file(path) == yaml.safe_load(text)
    (tmp_path / "user.yaml").write_text(yaml.safe_dump(USER_CONFIG), encoding="utf-8")
    assert load_config_file(tmp_path / "user.yaml") == USER_CONFIG
    assert MAX_EXPANDED_NODES <= 1_000_000
