"""Configs that passed ``vertebrae validate`` and failed later, or were refused in words that did not say what was
wrong (issue 48): scikit-learn's MiniBatchKMeans settings are checked by the schema, naming the key; a config with no
benchmark section (empty, ``{}``, a typo) says what it needs, naming the file."""

from __future__ import annotations

import pytest
import yaml

from vertebrae.cli import main

IRIS = {"dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "content"}},
        "extractors": {"raw": {"type": "precomputed"}}}


def _write(path, config) -> str:
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("kwargs, message", [
    ({"init": "os:system"}, "kmeans_kwargs.init: 'os:system' is not one of ['k-means++', 'random']"),
    ({"batch_size": 0}, "kmeans_kwargs.batch_size: 0 is less than the minimum of 1"),
    ({"tol": "small"}, "kmeans_kwargs.tol: 'small' is not of type 'number'"),
    ({"compute_labels": "yes"}, "kmeans_kwargs.compute_labels: 'yes' is not of type 'boolean'"),
])
def test_validate_refuses_kmeans_kwargs_scikit_learn_would_refuse_naming_the_key(tmp_path, monkeypatch, capsys,
                                                                                kwargs, message):
    # used to pass validate and fail inside scikit-learn in the score job
    monkeypatch.chdir(tmp_path)
    config = _write(tmp_path / "c.yaml", {"benchmarks": {"flowers": {**IRIS, "scoring": {"kmeans_kwargs": kwargs}}}})
    assert main(["validate", config]) == 2
    assert capsys.readouterr().err == f"vertebrae: error: config key benchmarks.flowers.scoring.{message}\n"


def test_the_schema_takes_minibatch_kmeans_own_settings():
    from vertebrae.planning.config import validate_config

    kwargs = {"batch_size": 64, "compute_labels": True, "init": "random", "init_size": None, "max_iter": 50,
              "max_no_improvement": 5, "n_init": "auto", "reassignment_ratio": 0.01, "tol": 0, "verbose": False}
    config = validate_config({"benchmarks": {"flowers": {**IRIS, "scoring": {"kmeans_kwargs": kwargs}}}})
    assert config["benchmarks"]["flowers"]["scoring"]["kmeans_kwargs"] == kwargs  # no default added
    from sklearn.cluster import MiniBatchKMeans

    MiniBatchKMeans(n_clusters=2, **kwargs)._validate_params()  # what the schema lets through, scikit-learn takes


@pytest.mark.parametrize("text, holds", [("{}\n", "it is empty"), ("", "it is empty"),
                                         ("seed: 0\nbenchmark: {}\n", "its keys are seed, benchmark")])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_config_without_benchmarks_says_what_it_needs(tmp_path, monkeypatch, capsys, text, holds, command):
    # used to be "config key (top level): {} is not valid under any of the given schemas"
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.yaml", text)
    assert main([command, "c.yaml", *(["-n"] if command == "run" else [])]) == 2
    assert capsys.readouterr().err == (
        "vertebrae: error: config file c.yaml: no benchmark to run: a config needs at least one of the sections "
        "'benchmarks' (labelled), 'retrieval' (retrieval) or 'zero_shot' (zero-shot), each naming benchmarks with "
        f"their dataset and extractors; {holds}\n")


def test_the_benchmark_sections_are_the_planners():
    from vertebrae.core.config import BENCHMARK_SECTIONS
    from vertebrae.planning.config import SECTIONS

    assert tuple(BENCHMARK_SECTIONS) == SECTIONS
