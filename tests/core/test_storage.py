"""vertebrae.core.storage without a server: URLs, flags, a job's paths, a config's s3:// values (the server-backed
checks and runs: tests/workflow/test_object_storage.py)."""

from __future__ import annotations

import os

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.core.storage import (
    config_urls, enter_root, job_argv, local_root, parse_url, refuse_secret_flags, refuse_urls_without_storage,
    under_prefix,
)


def test_urls_parse_to_bucket_and_prefix():
    assert parse_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert parse_url("s3://bucket") == ("bucket", "")
    for bad in ("gs://bucket/x", "s3:///x", "data/x.npz", "s3://b/x?versionId=1"):
        with pytest.raises(ConfigError, match="--storage"):
            parse_url(bad)


def test_a_job_works_inside_its_local_copies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = local_root(".snakemake/storage", "s3://bucket/run/1")
    assert root == os.path.join(".snakemake", "storage", "s3", "bucket", "run", "1")
    spec = tmp_path / "results" / ".vertebrae" / "specs" / "x.json"
    spec.parent.mkdir(parents=True)
    spec.write_text("{}")
    argv = ["plan", "--spec-file", "results/.vertebrae/specs/x.json", "--output", f"{root}/results/plans/x.json",
            "--side", "query"]
    assert job_argv(argv, root) == ["plan", "--spec-file", str(spec), "--output", "results/plans/x.json",
                                    "--side", "query"]
    assert enter_root(argv, {"VERTEBRAE_STORAGE_ROOT": root})[4] == "results/plans/x.json"
    assert os.getcwd() == str(tmp_path / root)
    assert enter_root(["a/b"], {}) == ["a/b"]


def test_s3_values_of_a_config_are_found_and_refused_without_storage():
    config = {"benchmarks": {"m": {"dataset": {"source": {"type": "npz", "path": "s3://b/p/data/x.npz"}},
                                   "extractors": {"e": {"type": "precomputed", "files": {"query": "s3://b/p/q.npy"}}}}}}
    assert config_urls(config) == [("benchmarks.m.dataset.source.path", "s3://b/p/data/x.npz"),
                                   ("benchmarks.m.extractors.e.files.query", "s3://b/p/q.npy")]
    with pytest.raises(ConfigError, match=r"benchmarks\.m\.dataset\.source\.path: 's3://b/p/data/x\.npz'.*--storage"):
        refuse_urls_without_storage(config, None)
    refuse_urls_without_storage(config, "s3://b/p")
    relative = under_prefix(config, "s3://b/p/")
    assert relative["benchmarks"]["m"]["dataset"]["source"]["path"] == "data/x.npz"
    assert relative["benchmarks"]["m"]["extractors"]["e"]["files"]["query"] == "q.npy"
    assert config["benchmarks"]["m"]["dataset"]["source"]["path"] == "s3://b/p/data/x.npz"  # a copy
    with pytest.raises(ConfigError, match=r"benchmarks\.m\.dataset\.source\.path: .*not under the run's storage"):
        under_prefix(config, "s3://b/other")


def test_a_credential_flag_is_refused_without_echoing_it():
    with pytest.raises(ConfigError) as refused:
        refuse_secret_flags(["--cores", "2", "--storage-s3-secret-key=hunter2"])
    assert "SNAKEMAKE_STORAGE_S3_SECRET_KEY" in str(refused.value) and "hunter2" not in str(refused.value)
    refuse_secret_flags(["--storage-s3-endpoint-url", "http://127.0.0.1:9000"])
