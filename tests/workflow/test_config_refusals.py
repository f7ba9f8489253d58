"""Config shapes `vertebrae validate` used to crash on (issue 32): one clear line naming the file or key, and the
same refusal from `vertebrae run` (through Snakemake) as from `validate`."""

from __future__ import annotations

import subprocess

import pytest

from workflow_support import BIN, unactivated_env

INT_NAME = """\
benchmarks:
  tiny:
    dataset:
      source: {type: sklearn, name: iris}
      identity: {kind: declared, name: iris, revision: "1"}
    extractors:
      123: {type: precomputed}
"""


def _vertebrae(tmp_path, *args):
    return subprocess.run([str(BIN / "vertebrae"), *args], cwd=tmp_path, env=unactivated_env(), capture_output=True,
                          text=True, timeout=300)


def test_validate_refuses_a_top_level_list_naming_the_file(tmp_path):
    (tmp_path / "list.yaml").write_text("- a\n- b\n", encoding="utf-8")
    proc = _vertebrae(tmp_path, "validate", "list.yaml")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("vertebrae: error: config file list.yaml: the top level must be a mapping of config "
                                   "keys (seed:, benchmarks:, ...), got a list")


def test_an_integer_extractor_name_is_refused_alike_by_validate_and_run(tmp_path):
    (tmp_path / "int.yaml").write_text(INT_NAME, encoding="utf-8")
    message = ('benchmarks.tiny.extractors.123: extractor name 123 is not text (YAML reads it unquoted as a number); '
               'quote it: "123":')
    proc = _vertebrae(tmp_path, "validate", "int.yaml")
    assert proc.returncode == 2 and proc.stderr.strip() == f"vertebrae: error: {message}"
    proc = _vertebrae(tmp_path, "run", "int.yaml", "-n")  # used to plan a candidate named 123
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


TINY = {"benchmarks": {"tiny": {"dataset": {"source": {"type": "sklearn", "name": "iris"},
                                            "identity": {"kind": "declared", "name": "iris", "revision": "1"}},
                                "extractors": {"raw": {"type": "precomputed"}}}}}


def _with(bench=None, **top):
    return {**TINY, **top, "benchmarks": {"tiny": {**TINY["benchmarks"]["tiny"], **(bench or {})}}}


@pytest.mark.parametrize("config,message", [
    (_with(seed=10 ** 26), r"config\.seed must be a non-negative integer, at most 4294967295"),
    (_with({"comparison": {"resamples": 10 ** 12}}), r"ComparisonConfig\.resamples must be an integer from 100 to 1,000,000"),
    (_with({"stability": {"enabled": True, "repeats": 10 ** 9}}), r"StabilityConfig\.repeats must be an integer from 2 to 10,000"),
    (_with({"scoring": {"kmeans_kwargs": {"bogus": 1}}}), r"benchmarks\.tiny.*kmeans_kwargs: unknown key\(s\) \['bogus'\]"),
    (_with({"compression": [{"method": "pca", "n_components": 2}, {"method": "pca", "n_components": 2}]}),
     r"benchmarks\.tiny\.compression\[1\]: the same compression as benchmarks\.tiny\.compression\[0\]"),
    (_with({"scoring": {"k": {0: 3, 1: 3, 2: 3, "zebra": 3}}}),
     r"benchmarks\.tiny\.scoring: OverlapScoringConfig\.k names class 'zebra', which is not in the dataset"),
    (_with({"scoring": {"exclude_classes": ["zebra"]}}),
     r"benchmarks\.tiny\.scoring: exclude_classes names class 'zebra', which is not in the dataset"),
    (_with({"scoring": {"exclude_classes": [0, 1, 2]}}), r"exclude_classes excludes every class"),
    # issue 29: built-in metrics and subsample stability refused from the targets at plan time, not in a score job
    (_with({"metrics": [{"type": "knn", "folds": 60}]}),
     r"benchmarks\.tiny\.metrics\[0\] \('knn'\): .*key 'folds' = 60 needs at least 60 rows per class; classes "
     r"'0' \(50\), '1' \(50\), '2' \(50\) have fewer"),
    (_with({"metrics": [{"type": "knn", "k": 200}]}), r"metrics\[0\] \('knn'\): .*key 'k' = 200 .* needs at least 201"),
    (_with({"metrics": [{"type": "few_shot", "shots": [1, 60]}]}),
     r"metrics\[0\] \('few_shot'\): .*key 'shots' = \[1, 60\] needs at least 61 rows per class; classes '0' \(50\)"),
    (_with({"metrics": [{"type": "knn", "split": ["train", "test"]}]}), r"key 'split' has 2 values for 150 rows"),
    (_with({"metrics": [{"type": "linear_probe", "split": {"train": ["0"], "test": ["nope"]}}]}),
     r"key 'split\.train' names row ids absent from the dataset"),
    (_with({"stability": {"enabled": True, "mode": "subsample", "subsample_fraction": 0.01}}),
     r"benchmarks\.tiny\.stability: subsample stability: subsample_fraction=0\.01 keeps fewer than 2"),
    ({"benchmarks": {"d": {"dataset": {"source": {"type": "sklearn", "name": "diabetes"}, "target_type": "regression",
                                       "identity": {"kind": "declared", "name": "d", "revision": "1"}},
                           "extractors": {"raw": {"type": "precomputed"}}, "metrics": [{"type": "clustering"}]}}},
     r"benchmarks\.d\.metrics\[0\] \('clustering'\): .*not defined for regression targets"),
    ({"benchmarks": {"x" * 300: TINY["benchmarks"]["tiny"]}}, r"benchmark name of 300 characters is too long"),
    ({"benchmarks": {"b": TINY["benchmarks"]["tiny"], "B": TINY["benchmarks"]["tiny"]}},
     r"config key benchmarks\.B: benchmarks\.b differs from it only in case"),
])
def test_plan_refuses_what_a_job_would_fail_on(config, message):
    # issue 32: each of these passed `vertebrae validate` and failed a job (or the whole run) later
    from vertebrae.core.errors import ConfigError
    from vertebrae.planning import plan

    with pytest.raises(ConfigError, match=message):
        plan(config)


@pytest.mark.parametrize("exclude", [None, ["dog"]])
def test_validate_refuses_multilabel_targets_whose_labels_always_come_together(tmp_path, monkeypatch, capsys, exclude):
    # issue 32: every label on every row passed `vertebrae validate` and failed the score job (a dependency's
    # ValueError, later vertebrae's own refusal); validate now refuses it, naming the dataset key and the labels
    import numpy as np
    import yaml

    from vertebrae.cli import main

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "tags.npz", embeddings=rng.normal(size=(30, 4)), labels=np.ones((30, 2), dtype=np.int8))
    bench = {"dataset": {"source": {"type": "npz", "path": "tags.npz"}, "target_type": "multilabel",
                         "label_names": ["cat", "dog"], "identity": {"kind": "declared", "name": "tags", "revision": "1"}},
             "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": 2}}
    if exclude:
        bench["scoring"]["exclude_classes"] = exclude
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({"benchmarks": {"tags": bench}}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "cfg.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vertebrae: error: benchmarks.tags.dataset: multilabel targets: every row that carries one "
                          "of the labels ['cat', 'dog'] carries all of them"), err
    assert not (tmp_path / ".snakemake").exists()  # refused at plan time, before Snakemake's dry run


def test_validate_refuses_a_one_row_class_naming_it_and_takes_the_opt_in(tmp_path, monkeypatch, capsys):
    # issue 48: a one-row class scored 0.0 whatever the embedding and was ranked; validate now names it
    import numpy as np
    import yaml

    from vertebrae.cli import main

    rng = np.random.default_rng(0)
    labels = np.array(["cat"] * 15 + ["dog"] * 14 + ["<lynx>"])
    np.savez(tmp_path / "pets.npz", embeddings=rng.normal(size=(30, 4)), labels=labels)
    bench = {"dataset": {"source": {"type": "npz", "path": "pets.npz"},
                         "identity": {"kind": "declared", "name": "pets", "revision": "1"}},
             "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": 2}}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({"benchmarks": {"pets": bench}}), encoding="utf-8")
    assert main(["validate", "cfg.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("vertebrae: error: benchmarks.pets.dataset: OverlapIndex needs at least 2 rows per class; "
                           "classes '<lynx>' (1) have fewer (rows in brackets): merge or drop them, or set "
                           "scoring.small_classes: exclude to leave them out of this score"), err
    bench["scoring"]["small_classes"] = "exclude"
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({"benchmarks": {"pets": bench}}), encoding="utf-8")
    assert main(["validate", "cfg.yaml"]) == 0, capsys.readouterr().err


def test_plan_refuses_more_folds_than_the_datasets_groups(tmp_path):
    # issue 29: kNN and probe folds keep each independence group on one side; 3 groups cannot fill 5 folds
    import numpy as np

    from vertebrae.core.errors import ConfigError
    from vertebrae.planning import plan

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", embeddings=rng.normal(size=(60, 4)), labels=np.arange(60) % 2,
             subject=np.arange(60) % 3)
    bench = {"dataset": {"source": {"type": "npz", "path": "g.npz", "groups_key": "subject"},
                         "identity": {"kind": "declared", "name": "g", "revision": "1"}},
             "extractors": {"raw": {"type": "precomputed"}}, "metrics": [{"type": "knn", "k": 3}]}
    with pytest.raises(ConfigError, match=r"benchmarks\.g\.metrics\[0\] \('knn'\): .*key 'folds' = 5 exceeds the 3 "
                                          r"independence groups"):
        plan({"benchmarks": {"g": bench}}, base_dir=tmp_path)
    bench["metrics"] = [{"type": "knn", "k": 3, "folds": 3}]
    assert plan({"benchmarks": {"g": bench}}, base_dir=tmp_path).reports  # as many folds as groups: planned
    bench["metrics"] = [{"type": "knn", "k": 3, "group_folds": False}]
    assert plan({"benchmarks": {"g": bench}}, base_dir=tmp_path).reports  # groups ignored by request
    bench["metrics"] = [{"type": "few_shot", "shots": [1, 2], "episodes": 4}]
    with pytest.raises(ConfigError, match=r"benchmarks\.g\.metrics\[0\] \('few_shot'\): .*key 'shots': at \d+ shots, "
                                          r"episode 0's support holds a row of every independence group"):
        plan({"benchmarks": {"g": bench}}, base_dir=tmp_path)  # 3 subjects: one class's 2 shots + the other's hold all
    bench["metrics"] = [{"type": "few_shot", "shots": [1, 2], "episodes": 4, "group_episodes": False}]
    assert plan({"benchmarks": {"g": bench}}, base_dir=tmp_path).reports
