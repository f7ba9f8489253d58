"""A plan job reads neither of the run's caches (issue 47): not the data files' digests (``OUT/.vertebrae/digests.json``)
nor the records of passed checks (``OUT/.vertebrae/checks/``). The planner hands it the records its extractor's checks
recall inside its spec file (``with_checks``), outside the digest of the file's name; a job given none checks in full.

One small config planned as the Snakefile plans it (``plan_once``, spec files written): a labelled benchmark of an
.npz file embedded by declared scikit-learn steps. Each plan job runs as the workflow runs it, in a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from small_workflow import audit_env
from vertebrae.core.artifacts import read_json_artifact
from vertebrae.core.check_records import CHECK_RECORDS_DIR
from vertebrae.core.file_digests import CACHE_FILE, CACHE_SCHEMA
from vertebrae.core.fingerprint import canonical_json
from vertebrae.stages.plan import CHECKED, read_spec_file, spec_file_name
from workflow_support import three_files_config

STEPS = [{"estimator": "sklearn.preprocessing.StandardScaler"}]
VERTEBRAE = str(Path(sys.executable).parent / "vertebrae")
PLAN_AND_SAY_IF_SKLEARN = """
import sys
from vertebrae.stages.plan import run_plan
run_plan(None, sys.argv[2], spec_file=sys.argv[1])
print("sklearn" in sys.modules)
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """(working folder, the embedding spec's file): the config planned there, its spec files written."""
    from vertebrae.planning.plan_once import plan_once

    root = tmp_path_factory.mktemp("plan-caches")
    config = three_files_config(root)
    del config["retrieval"]
    config["benchmarks"]["models"]["extractors"] = {"scaled": {"type": "sklearn", "steps": STEPS}}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.delenv("VERTEBRAE_PLAN", raising=False)
        plan = plan_once(config)
        plan.write_spec_files()
        mp.delenv("VERTEBRAE_PLAN", raising=False)  # plan_once sets it for the jobs it plans for
    [embed] = [fp for fp in plan.planned() if plan.specs[fp]["stage"] == "embed"]
    return root, root / plan.spec_file(embed)


def _plant_lies(root: Path) -> None:
    """Caches that would mislead a job reading them: every check record says the steps are other classes, and the
    data file's digest entry (its real size and mtime) is wrong."""
    state = root / "results" / ".vertebrae"
    for record in (state / CHECK_RECORDS_DIR).glob("*.json"):
        data = json.loads(record.read_text(encoding="utf-8"))
        record.write_text(json.dumps({**data, "found": ["sklearn.decomposition._pca.PCA"]}), encoding="utf-8")
    rows = (root / "data" / "rows.npz").resolve()
    st = rows.stat()
    entry = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": "0" * 64}
    (state / CACHE_FILE.name).write_text(json.dumps({"schema": CACHE_SCHEMA, "files": {str(rows): entry}}))


def test_the_spec_file_carries_the_records_outside_its_names_digest(planned):
    root, spec_file = planned
    spec = read_spec_file(spec_file)
    [record] = spec[CHECKED].values()
    assert record["check"] == "sklearn-steps" and record["found"] == ["sklearn.preprocessing._data.StandardScaler"]
    assert spec_file.name == spec_file_name({k: v for k, v in spec.items() if k != CHECKED})  # the name stands
    assert [p.stem for p in (root / "results/.vertebrae/checks").glob("*.json")] == list(spec[CHECKED])


def test_a_plan_job_opens_nothing_of_the_runs_state_but_its_spec_file(planned, tmp_path):
    root, spec_file = planned
    _plant_lies(root)
    logs = tmp_path / "audit"
    logs.mkdir()
    output = tmp_path / "plans" / f"{spec_file.name[:16]}.json"
    proc = subprocess.run([VERTEBRAE, "plan", "--spec-file", str(spec_file.relative_to(root)), "--output", str(output)],
                          cwd=root, env={**os.environ, **audit_env(logs)}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [log] = logs.glob("*.jsonl")
    state = str(root / "results" / ".vertebrae")
    opened = {json.loads(line)["path"] for line in log.read_text(encoding="utf-8").splitlines()[1:]}
    assert {p for p in opened if p.startswith(state)} == {str(spec_file)}
    assert str(root / "data" / "rows.npz") in opened  # the checker sees the job's reads: the rows are counted
    spec = {k: v for k, v in read_spec_file(spec_file).items() if k != CHECKED}
    assert read_json_artifact(output, "plan", fingerprint=spec["fingerprint"]) == spec  # the records stay out


def test_the_job_recalls_only_the_records_it_is_given(planned, tmp_path):
    """The records in the spec file spare the job scikit-learn's imports, with the record folder gone; a spec file
    without them is checked in full although the folder holds the record (the job does not look there)."""
    root, spec_file = planned
    bare = tmp_path / "bare" / spec_file.name
    bare.parent.mkdir()
    spec = read_spec_file(spec_file)
    bare.write_text(canonical_json({k: v for k, v in spec.items() if k != CHECKED}), encoding="utf-8")

    def imports_sklearn(path: Path) -> bool:
        proc = subprocess.run([sys.executable, "-c", PLAN_AND_SAY_IF_SKLEARN, str(path), str(tmp_path / "p" / "x.json")],
                              cwd=root, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.split()[-1] == "True"

    assert (root / "results/.vertebrae/checks").is_dir()
    assert imports_sklearn(bare)
    for record in (root / "results/.vertebrae/checks").glob("*.json"):
        record.unlink()
    assert not imports_sklearn(spec_file)
