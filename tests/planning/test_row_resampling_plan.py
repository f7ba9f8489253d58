"""Few-class benchmarks' row resampling is decided at plan time (issue 44) from one load of the labels, shared with
the other plan-time checks; a WebDataset source's labels are not read for it (a pass over every shard at each plan):
its comparison pairs over classes, in the workflow's plan and in process alike."""

from __future__ import annotations

import pytest

from format_fixtures import tiny_images, write_tar_shards
from vertebrae.data.sources import webdataset as wds_module
from vertebrae.planning import benchmarks_from_config, labelled as planning_labelled, plan

IDENTITY = {"kind": "declared", "revision": "1"}


def _score_plans(planned) -> list[dict]:
    """The scoring plans of the report and of the jobs that score whole candidates (one job, or a fan-out's merge)."""
    return [spec["plan"] for spec in planned.specs.values()
            if spec.get("stage") in ("score", "merge-labelled-partials", "report")]


def test_iris_plans_row_resampling_from_one_load(monkeypatch):
    loads = []
    real = planning_labelled.load_declared_dataset
    monkeypatch.setattr(planning_labelled, "load_declared_dataset", lambda *a, **k: loads.append(1) or real(*a, **k))
    config = {"benchmarks": {"iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {**IDENTITY, "name": "iris"}},
        "extractors": {"raw": {"type": "precomputed"}}, "metrics": [{"type": "knn", "k": 5}]}}}
    plans = _score_plans(plan(config))
    assert plans and all(p["row_resampling"]["mode"] == "auto" for p in plans)
    assert len(loads) == 1  # the knn check and the row-resampling decision read the labels once


def test_a_webdataset_source_keeps_the_per_class_unit_without_reading_labels(tmp_path, monkeypatch):
    write_tar_shards(tmp_path / "shards", tiny_images(13))
    config = {"benchmarks": {"tars": {
        "dataset": {"source": {"type": "webdataset", "path": "shards/train-{000000..000002}.tar"},
                    "identity": {**IDENTITY, "name": "tars"}},
        "extractors": {"raw": {"type": "callable", "branches": {"image": "numpy:asarray"}}}}}}

    def no_label(*args, **kwargs):
        raise AssertionError("a label was read at plan time")

    monkeypatch.setattr(wds_module, "_label", no_label)
    monkeypatch.chdir(tmp_path)
    plans = _score_plans(plan(config))
    assert plans and all("row_resampling" not in p for p in plans)
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    benchmark = benchmarks_from_config(config)["tars"]  # in process: the same decision
    assert benchmark.plan.row_resampling is None


def _iris(**extra) -> dict:
    return {"benchmarks": {"iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {**IDENTITY, "name": "iris"}},
        "extractors": {"raw": {"type": "precomputed"}}, **extra}}}


def test_row_resampling_is_a_benchmark_key_validate_checks():
    from vertebrae.core.errors import ConfigError

    kept = _score_plans(plan(_iris(row_resampling={"mode": "class"})))
    assert kept and all("row_resampling" not in p for p in kept)
    assert benchmarks_from_config(_iris(row_resampling={"mode": "class"}))["iris"].plan.row_resampling is None
    more = _score_plans(plan(_iris(row_resampling={"resamples": 500, "fraction": 0.6})))
    assert all(p["row_resampling"]["resamples"] == 500 and p["row_resampling"]["fraction"] == 0.6 for p in more)
    assert benchmarks_from_config(_iris(row_resampling={"resamples": 500}))["iris"].plan.row_resampling.resamples == 500
    for bad, words in (({"resamples": 5}, "row_resampling"), ({"mode": "sometimes"}, "row_resampling"),
                       ({"fraction": 0.01, "mode": "rows"}, "too small to subsample")):
        with pytest.raises(ConfigError, match=words):
            plan(_iris(row_resampling=bad))


def test_mode_rows_over_a_webdataset_reads_its_labels(tmp_path, monkeypatch):
    write_tar_shards(tmp_path / "shards", tiny_images(13))
    monkeypatch.chdir(tmp_path)
    config = {"benchmarks": {"tars": {
        "dataset": {"source": {"type": "webdataset", "path": "shards/train-{000000..000002}.tar"},
                    "identity": {**IDENTITY, "name": "tars"}},
        "extractors": {"raw": {"type": "callable", "branches": {"image": "numpy:asarray"}}},
        "row_resampling": {"mode": "rows", "fraction": 0.7}}}}
    plans = _score_plans(plan(config))
    assert plans and all(p["row_resampling"]["mode"] == "rows" for p in plans)
