"""The run's one folder (issue 45, part 4): what lies where, the old layout read back, a bad --out refused."""

from __future__ import annotations

import os

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import CACHE_FILE, FileDigests
from vertebrae.core.out_folder import (
    check_out_folder,
    config_out,
    current_out,
    is_out_folder,
    records_of,
    results_of,
    spelled_out,
    state_dir,
    working_folder,
    write_out_record,
    writing_to,
)


def test_the_config_names_the_out_folder_else_results():
    assert config_out({}) == "results" and config_out({"out": "runs/a/"}) == "runs/a" and config_out(None) == "results"
    assert state_dir("./runs/a").as_posix() == "runs/a/.vertebrae"


def test_the_caches_follow_the_run_being_planned_and_serve_planning_only(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEBRAE_OUT", raising=False)
    assert current_out() == "results"
    monkeypatch.setenv("VERTEBRAE_OUT", "runs/b")  # what the workflow sets for its jobs
    assert current_out() == "runs/b"
    assert FileDigests.under(tmp_path).cache_path is None  # a job reads no cache (issue 47)
    with writing_to("runs/c"):
        assert current_out() == "runs/c"
        assert FileDigests.under(tmp_path).cache_path == tmp_path / "runs/c" / CACHE_FILE
    assert current_out() == "runs/b"


def test_a_file_or_an_unwritable_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ConfigError, match=r"--out: taken is not a folder"):
        check_out_folder("taken", tmp_path, where="--out")
    with pytest.raises(ConfigError, match=r"--out: taken/sub cannot be made: .*taken is not a folder"):
        check_out_folder("taken/sub", tmp_path, where="--out")
    check_out_folder("new/deeper", tmp_path)  # made by the run
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ConfigError, match=r"out: locked/x: the run cannot write in .*locked"):
            check_out_folder("locked/x", tmp_path)


def test_records_are_read_in_the_out_folder_else_beside_an_old_results_folder(tmp_path):
    old = tmp_path / "old"
    (old / "results").mkdir(parents=True)
    (old / "benchmarks").mkdir()
    (old / ".vertebrae").mkdir()  # the old layout's state, beside results/
    assert records_of(old / "results") == (old / "benchmarks").resolve()
    assert results_of(old / "benchmarks") == old / "results" and not is_out_folder(old)
    new = tmp_path / "new" / "runs" / "a"
    (new / "benchmarks").mkdir(parents=True)
    write_out_record("runs/a", tmp_path / "new")
    assert records_of(new) == new / "benchmarks" and results_of(new / "benchmarks") == new and is_out_folder(new)
    assert spelled_out(new) == "runs/a" and working_folder(new) == tmp_path / "new"
    assert spelled_out(old / "results") == "results" and working_folder(old / "results") == old
