"""One plan per invocation: a process that inherits VERTEBRAE_PLAN reads the main process's plan, any other plans."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vertebrae.planning import plan
from vertebrae.planning.plan_once import PLAN_ENV, plan_digest, plan_once, plans_dir
from workflow_support import snakemake, write_config


def _config(tmp_path):
    return {"seed": 0, "embedding": {"shards": 2}, "benchmarks": {"b": {
        "dataset": {"source": {"type": "npz", "path": str(tmp_path / "data.npz"), "features_key": "X", "labels_key": "y"},
                    "identity": {"kind": "content"}},
        "extractors": {"raw": {"type": "precomputed"}}}}}


def _write_data(tmp_path, seed):
    rng = np.random.default_rng(seed)
    np.savez(tmp_path / "data.npz", X=rng.normal(size=(40, 4)), y=np.repeat([0, 1], 20))


@pytest.fixture
def planned(tmp_path, monkeypatch):
    monkeypatch.setenv(PLAN_ENV, "")  # recorded, so that what plan_once sets is undone after the test
    monkeypatch.delenv(PLAN_ENV)
    _write_data(tmp_path, 0)
    first = plan_once(_config(tmp_path), base_dir=tmp_path)
    _write_data(tmp_path, 1)  # a fresh plan now gives other fingerprints
    assert set(plan(_config(tmp_path), base_dir=tmp_path).specs) != set(first.specs)
    return first


def test_the_main_process_plans_in_full_and_names_its_plan(planned, tmp_path):
    digest = plan_digest(_config(tmp_path), [], tmp_path)
    assert __import__("os").environ[PLAN_ENV] == digest
    assert (tmp_path / plans_dir({}) / f"{digest}.json").is_file()


def test_a_job_of_the_same_invocation_reads_that_plan(planned, tmp_path):
    again = plan_once(_config(tmp_path), base_dir=tmp_path)
    assert again == planned  # the DAG's plan, although the data changed since


def test_a_new_invocation_plans_again(planned, tmp_path, monkeypatch):
    monkeypatch.delenv(PLAN_ENV)
    assert set(plan_once(_config(tmp_path), base_dir=tmp_path).specs) != set(planned.specs)


def test_another_config_plans_again(planned, tmp_path):
    config = _config(tmp_path)
    config["seed"] = 1
    assert plan_once(config, base_dir=tmp_path) == plan(config, base_dir=tmp_path)


@pytest.mark.parametrize("damage", ["{not json", '{"digest": "x", "plan": {}}', None])
def test_an_unreadable_or_foreign_plan_file_is_planned_again(planned, tmp_path, damage):
    path = tmp_path / plans_dir({}) / f"{plan_digest(_config(tmp_path), [], tmp_path)}.json"
    if damage is None:
        path.unlink()
    else:
        path.write_text(damage, encoding="utf-8")
    assert set(plan_once(_config(tmp_path), base_dir=tmp_path).specs) != set(planned.specs)


def test_a_second_snakemake_start_recalls_the_checked_sklearn_steps(tmp_path, monkeypatch):
    """Planning checks declared scikit-learn steps by importing them (1-2 s per start); the next start of the same
    config recalls that check (results/.vertebrae/checks, vertebrae.core.check_records) and imports no scikit-learn."""
    _write_data(tmp_path, 0)
    config = _config(tmp_path)
    config["benchmarks"]["b"]["extractors"]["pca"] = {"type": "sklearn", "steps": [
        {"estimator": "sklearn.preprocessing.StandardScaler"},
        {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 2}}]}
    write_config(tmp_path, config)
    monkeypatch.delenv(PLAN_ENV, raising=False)
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # every import of the Snakemake process, on its stderr

    def sklearn_imports(proc) -> list[str]:
        return [line for line in proc.stderr.splitlines() if re.search(r"\|\s+sklearn(\.|$)", line)]

    assert any(line.endswith("sklearn.pipeline") for line in sklearn_imports(snakemake(tmp_path, "-n")))
    assert len(list((tmp_path / "results" / ".vertebrae" / "checks").glob("*.json"))) == 1
    second = snakemake(tmp_path, "-n")
    assert "fit_extractor" in second.stdout and sklearn_imports(second) == []  # the PCA still planned
    config["benchmarks"]["b"]["extractors"]["pca"]["steps"][1]["params"]["n_components"] = -1
    write_config(tmp_path, config)
    refused = snakemake(tmp_path, "-n", check=False)  # another declaration: checked in full, and refused
    assert refused.returncode != 0 and "steps[1].params (PCA)" in refused.stdout + refused.stderr
