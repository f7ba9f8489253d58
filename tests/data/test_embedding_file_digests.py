"""A large embedding file's digest (issue 47): planning caches it in the run's state (``OUT/.vertebrae/digests.json``,
the one digest cache), a job hashes it in its own process and reads no cache. Before, files of 8 MiB or more kept
their digests in a folder of their own under the user's home (``~/.cache/vertebrae/digests``), which every process,
jobs included, read and wrote: a job read an undeclared file, and a run or the tests wrote outside the repository.

One labelled benchmark of one precomputed .npz file of 8 MiB (90 rows of 8 dims and a padding member), planned as the
Snakefile plans it (``plan_once``, spec files written), with ``HOME`` and ``XDG_CACHE_HOME`` in the test's folder.
Its plan job (it hashes the file to re-derive its fingerprint) and a shard job run as the workflow runs them, each a
process of its own under the file-access audit's hook (tests/workflow/file_audit), with lying cache entries planted.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import vertebrae
from small_workflow import AUDIT_HOOK, audit_env
from vertebrae.core.artifacts import read_embeddings, read_json_artifact
from vertebrae.core.file_digests import CACHE_FILE, CACHE_SCHEMA
from vertebrae.core.out_folder import writing_to
from vertebrae.stages.plan import CHECKED, read_spec_file, shard_fingerprint
from workflow_support import three_files_config

VERTEBRAE = str(Path(sys.executable).parent / "vertebrae")
PACKAGE = str(Path(vertebrae.__file__).resolve().parent)
BIG = 8 << 20  # the size from which the old code kept a file's digest under the home folder
WRONG = "0" * 64


def _homes(root: Path) -> dict[str, str]:
    """A home and a user cache folder of the test's own (where the old code kept large files' digests)."""
    home, cache = root.parent / f"{root.name}-home", root.parent / f"{root.name}-xdg"
    home.mkdir(exist_ok=True)
    cache.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CACHE_HOME": str(cache)}


def _big_npz(root: Path) -> Path:
    """``emb/a.npz`` of three_files_config (its 90 rows and ids) padded past 8 MiB, dated an hour back (past the
    cache's racy window, as a user's file is)."""
    path = root / "emb" / "a.npz"
    with np.load(path) as data:
        members = {key: data[key] for key in data.files}
    np.savez(path, **members, padding=np.random.default_rng(0).integers(0, 255, BIG, dtype=np.uint8))
    back = time.time() - 3600
    os.utime(path, (back, back))
    assert path.stat().st_size >= BIG
    return path


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """(working folder, the big file, its SHA-256, the plan, the environment's HOME / XDG_CACHE_HOME)."""
    from vertebrae.planning.plan_once import plan_once

    root = tmp_path_factory.mktemp("big-embedding-file")
    config = three_files_config(root)
    del config["retrieval"]
    bench = config["benchmarks"]["models"]
    bench["extractors"] = {"a": bench["extractors"]["a"]}
    big = _big_npz(root)
    homes = _homes(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name, value in homes.items():
            mp.setenv(name, value)
        mp.delenv("VERTEBRAE_DIGEST_CACHE", raising=False)
        mp.delenv("VERTEBRAE_PLAN", raising=False)
        plan = plan_once(config)
        plan.write_spec_files()
        mp.delenv("VERTEBRAE_PLAN", raising=False)  # plan_once sets it for the jobs it plans for
    return root, big, hashlib.sha256(big.read_bytes()).hexdigest(), plan, homes


def _plant_lies(root: Path, big: Path, homes: dict[str, str]) -> None:
    """A wrong digest for the big file's very path, size, mtime and inode wherever a cache kept one: the run's
    digests.json, and the folder under the home the old code read (``~/.cache/vertebrae/digests``, entries named by
    the SHA-256 of the key's repr)."""
    resolved = big.resolve()
    st = resolved.stat()
    key = (str(resolved), st.st_size, st.st_mtime_ns, st.st_ino)
    for base in (Path(homes["XDG_CACHE_HOME"]), Path(homes["HOME"]) / ".cache"):
        entry = base / "vertebrae" / "digests" / hashlib.sha256(repr(key).encode("utf-8")).hexdigest()
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(WRONG, encoding="ascii")
    state = root / "results" / CACHE_FILE
    entry = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": WRONG}
    state.write_text(json.dumps({"schema": CACHE_SCHEMA, "files": {str(resolved): entry}}), encoding="utf-8")


def _job(root: Path, homes: dict[str, str], log: Path, *args: str) -> set[str]:
    """Run ``vertebrae ARGS`` in ``root`` as a job runs, under the audit hook; the paths it opened, listed or wrote
    outside the Python environment."""
    env = {**os.environ, **homes, **audit_env(log)}
    env.pop("VERTEBRAE_DIGEST_CACHE", None)
    proc = subprocess.run([VERTEBRAE, *args], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [record] = log.glob("*.jsonl")
    return {json.loads(line)["path"] for line in record.read_text(encoding="utf-8").splitlines()[1:]}


def _outside(opened: set[str], allowed: list[Path]) -> set[str]:
    """The paths not under ``allowed``, the system's folders, the package itself (an editable install's modules) nor
    the audit's hook (as tests/workflow/test_file_access.py allows them)."""
    roots = [Path(r) for r in ("/dev", "/proc", "/sys", "/etc", "/usr", "/lib", "/opt", PACKAGE, AUDIT_HOOK)]
    return {p for p in opened if "__editable__" not in p and not any(Path(p).is_relative_to(r) for r in roots + allowed)}


def _empty(homes: dict[str, str]) -> bool:
    return not any(any(Path(folder).rglob("*")) for folder in homes.values())


def test_the_planner_keeps_the_digest_in_the_runs_state_not_the_home(planned):
    root, big, digest, _, homes = planned
    entries = json.loads((root / "results" / CACHE_FILE).read_text(encoding="utf-8"))["files"]
    assert entries[str(big.resolve())]["sha256"] == digest
    assert _empty(homes)  # nothing written under the home


def test_a_plan_job_hashes_the_big_file_itself_reading_no_cache(planned, tmp_path):
    """The plan job re-derives the embedding's fingerprint from the file's digest: it hashes the file, whatever a
    cache says (a wrong entry made the old code refuse its own plan: "does not hash to its fingerprint")."""
    root, big, _, plan, homes = planned
    _plant_lies(root, big, homes)
    [embed] = [fp for fp in plan.planned() if plan.specs[fp]["stage"] == "embed"]
    spec_file = root / plan.spec_file(embed)
    output = tmp_path / "plans" / f"{embed}.json"
    opened = _job(root, homes, tmp_path / "audit", "plan", "--spec-file", plan.spec_file(embed),
                  "--output", str(output))
    spec = {k: v for k, v in read_spec_file(spec_file).items() if k != CHECKED}
    assert read_json_artifact(output, "plan", fingerprint=embed) == spec
    assert str(big) in opened
    assert _outside(opened, [root / "data", root / "emb", tmp_path]) == {str(spec_file)}

    # the shard job that follows reads its plan and the file's rows, and no cache either
    shard = tmp_path / "shard.h5"
    opened = _job(root, homes, tmp_path / "shard-audit", "embed-shard", "--plan-json", str(output),
                  "--shard-index", "0", "--output", str(shard))
    assert _outside(opened, [root / "data", root / "emb", tmp_path]) == set()
    assert read_embeddings(shard, fingerprint=shard_fingerprint(spec, 0)).matrix.shape == (90, 8)


def test_two_plannings_hash_the_big_file_once(planned, monkeypatch):
    """The planner's cache still spares a new start the file's hashing: planned again in a fresh process's state
    (the in-process memo emptied), the digest comes from digests.json."""
    from vertebrae.core import file_digests
    from vertebrae.extractors.precomputed import PrecomputedFileExtractor

    root, big, digest, _, homes = planned
    state = root / "results" / CACHE_FILE
    state.unlink(missing_ok=True)  # the lies planted above go; the next planning builds it anew
    hashed: list[str] = []
    sha256_file = file_digests.sha256_file

    def counted(path):
        hashed.append(os.fspath(path))
        return sha256_file(path)

    monkeypatch.setattr(file_digests, "sha256_file", counted)
    monkeypatch.chdir(root)
    decl = {None: {"path": "emb/a.npz", "key": "embeddings", "ids": "ids"}}
    for _ in range(2):
        monkeypatch.setattr(file_digests, "_MEMO", {})  # a new process
        with writing_to("results"):
            assert PrecomputedFileExtractor("a", decl).recipe()["file"]["sha256"] == digest
    assert hashed == [str(big.resolve())]
    assert json.loads(state.read_text(encoding="utf-8"))["files"][str(big.resolve())]["sha256"] == digest
