"""``vertebrae eval`` asks what the YAML can: ``--metric TYPE[,key=value...]`` (repeatable: the YAML's ``metrics:``
entries, checked as they are), ``--primary METRIC``, ``--protocol zero-shot --prompts FILE`` and ``--name``; each bad
value is refused with a line naming its flag. One real run on sklearn's wine ranks by the asked metric."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from sklearn.datasets import load_wine

from vertebrae.cli import main
from vertebrae.planning.config import validate_config

LABELLED = ["eval", "--protocol", "labelled", "--data", "sklearn:wine", "--model", "precomputed:raw.npy"]
ZERO_SHOT = ["eval", "--protocol", "zero-shot", "--data", "sklearn:wine", "--model", "open_clip:local-dir:clip"]


def _printed(capsys, *args: str) -> dict:
    assert main([*args, "--print-config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def _refused(capsys, *args: str) -> str:
    assert main([*args, "--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vertebrae: error: ") and len(err.strip().splitlines()) == 1, err
    return err


def test_metrics_primary_and_name_land_where_the_yaml_holds_them(capsys):
    config = _printed(capsys, *LABELLED, "--metric", "knn,k=20", "--metric", "linear_probe,Cs=[0.1,1],folds=3",
                      "--primary", "knn", "--name", "wine_knn")
    bench = config["benchmarks"]["wine_knn"]
    assert bench["metrics"] == [{"type": "knn", "k": 20}, {"type": "linear_probe", "Cs": [0.1, 1], "folds": 3}]
    assert bench["primary_metric"] == "knn"
    assert validate_config(config)["benchmarks"]["wine_knn"]["primary_metric"] == "knn"  # the YAML it would be
    # retrieval: --primary is its retrieval.primary_metric
    retrieval = _printed(capsys, "eval", "--protocol", "retrieval", "--data", "sklearn:wine", "--model",
                         "precomputed:raw.npy", "--primary", "mrr")
    assert retrieval["retrieval"]["wine"]["retrieval"] == {"primary_metric": "mrr"}


def test_each_bad_ask_is_refused_naming_its_flag(capsys):
    assert "--metric 'knn,kk=3': metric config of type 'knn' has unknown key(s) ['kk']" in _refused(
        capsys, *LABELLED, "--metric", "knn,kk=3")
    assert "--metric 'knn,k=0': KNNMetric: key 'k' must be an integer >= 1, got 0" in _refused(
        capsys, *LABELLED, "--metric", "knn,k=0")
    assert "--metric 'knm': unknown metric 'knm'; metrics: callable, label_retrieval, knn" in _refused(
        capsys, *LABELLED, "--metric", "knm")
    assert "--metric 'knn,k': option 'k' is not key=value" in _refused(capsys, *LABELLED, "--metric", "knn,k")
    assert "--primary 'knn': not one of the benchmark's metrics ['overlap']" in _refused(
        capsys, *LABELLED, "--primary", "knn")
    retrieval = ["eval", "--protocol", "retrieval", "--data", "sklearn:wine", "--model", "precomputed:raw.npy"]
    assert "--primary 'ndcg@7': RetrievalConfig.primary_metric 'ndcg@7' uses K=7" in _refused(
        capsys, *retrieval, "--primary", "ndcg@7")
    assert "--metric 'knn': applies to --protocol labelled only" in _refused(capsys, *retrieval, "--metric", "knn")
    assert "--prompts p.yaml: applies to --protocol zero-shot only" in _refused(
        capsys, *LABELLED, "--prompts", "p.yaml")
    assert "--name 'a/b': letters, digits" in _refused(capsys, *LABELLED, "--name", "a/b")


def test_zero_shot_takes_its_prompts_from_a_file(capsys, tmp_path):
    templates = tmp_path / "templates.yaml"
    templates.write_text(yaml.safe_dump({"templates": ["a wine of class {label}", "class {label}"],
                                         "class_names": [{"label": 0, "name": "barolo"}]}), encoding="utf-8")
    config = _printed(capsys, *ZERO_SHOT, "--prompts", str(templates), "--primary", "macro_f1", "--name", "zs")
    bench = config["zero_shot"]["zs"]
    assert bench["templates"] == ["a wine of class {label}", "class {label}"]
    assert bench["class_names"] == [{"label": 0, "name": "barolo"}]
    assert bench["zero_shot"] == {"primary_metric": "macro_f1"}
    lines = tmp_path / "templates.txt"
    lines.write_text("a photo of {label}\n\nthe {label}\n", encoding="utf-8")
    assert _printed(capsys, *ZERO_SHOT, "--prompts", str(lines))["zero_shot"]["wine"]["templates"] == [
        "a photo of {label}", "the {label}"]
    assert "--protocol zero-shot needs --prompts FILE" in _refused(capsys, *ZERO_SHOT)
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompt: [x]\n", encoding="utf-8")
    assert f"--prompts {bad}: expected a mapping of prompts, templates" in _refused(capsys, *ZERO_SHOT, "--prompts",
                                                                                    str(bad))
    assert "--primary 'knn'" in _refused(capsys, *ZERO_SHOT, "--prompts", str(lines), "--primary", "knn")


def test_a_run_ranks_by_the_metric_asked_for(tmp_path, monkeypatch, capsys):
    """A user's line: two candidates on wine (its features and noise), kNN beside OverlapIndex, ranking by kNN."""
    monkeypatch.chdir(tmp_path)
    X, _ = load_wine(return_X_y=True)
    np.save(tmp_path / "raw.npy", X.astype(np.float32))
    np.save(tmp_path / "noise.npy", np.random.default_rng(0).normal(size=X.shape).astype(np.float32))
    assert main([*LABELLED, "--model", "precomputed:noise.npy", "--metric", "knn,k=5", "--primary", "knn",
                 "--name", "wine_knn", "--cores", "2"]) == 0
    out = capsys.readouterr().out
    assert "wine_knn (labelled; config results/eval/wine_knn.yaml" in out
    ranking = [line for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert ranking[0].startswith("| 1 | raw.npy | knn |") and ranking[1].startswith("| 2 | noise.npy | knn |")
    assert "compared with the leader, **raw.npy**, on knn" in out
    written = yaml.safe_load((tmp_path / "results/eval/wine_knn.yaml").read_text(encoding="utf-8"))
    assert written["benchmarks"]["wine_knn"]["metrics"] == [{"type": "knn", "k": 5}]


@pytest.mark.parametrize("flag", ["--metric", "--primary", "--prompts", "--name"])
def test_eval_help_lists_the_new_flags(flag, capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert flag in capsys.readouterr().out
