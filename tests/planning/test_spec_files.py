"""The plan's spec files: written once per content, rewritten when damaged, none for partial scores (issue 18, 5)."""

from __future__ import annotations

import os

from vertebrae.core.fingerprint import fingerprint
from vertebrae.stages.plan import read_spec_file
from vertebrae.planning.dag import WorkflowPlan
from vertebrae.planning.spec_files import spec_dir, write_spec_files

SPEC_DIR = spec_dir()  # under the default out folder: results/.vertebrae/specs


def spec(stage: str, n: int) -> dict:
    recipe = {"n": n}
    return {"stage": stage, "fingerprint": fingerprint("protocol", recipe), "recipe": recipe}


def test_spec_files_are_written_once_and_rewritten_when_damaged(tmp_path):
    specs = {s["fingerprint"]: s for s in (spec("protocol", 1), spec("protocol", 2))}
    paths = write_spec_files(specs, tmp_path)
    assert set(paths) == set(specs) and all(p.startswith(f"{SPEC_DIR}/") for p in paths.values())
    for fp, path in paths.items():
        assert read_spec_file(tmp_path / path) == specs[fp]
    first, second = (tmp_path / p for p in paths.values())
    stamp = first.stat().st_mtime_ns
    os.utime(first, ns=(stamp - 10**9, stamp - 10**9))  # an older file: kept as it is
    second.write_text("{", encoding="utf-8")  # truncated: written again
    assert write_spec_files(specs, tmp_path) == paths
    assert first.stat().st_mtime_ns == stamp - 10**9
    assert read_spec_file(second) == specs[second.name[:16]]
    assert sorted(p.name for p in (tmp_path / SPEC_DIR).iterdir()) == sorted(p.rsplit("/", 1)[1] for p in paths.values())


def test_the_plan_writes_a_spec_file_per_plan_job_and_none_for_partial_scores(tmp_path):
    plan = WorkflowPlan()
    merge, partial, other = (plan.add(spec(stage, n)) for n, stage in enumerate(
        ("merge-retrieval-partials", "score-retrieval-partial", "report")))
    plan.fanouts[partial] = merge
    assert plan.planned() == [merge, other]
    plan.write_spec_files(tmp_path)
    assert sorted(plan.spec_files) == sorted([merge, other])
    assert {read_spec_file(tmp_path / plan.spec_file(fp))["fingerprint"] for fp in (merge, other)} == {merge, other}
    assert len(list((tmp_path / SPEC_DIR).iterdir())) == 2
    assert WorkflowPlan(specs=plan.specs).spec_file(merge) == plan.spec_file(merge)  # named without writing


def test_spec_files_lie_in_the_out_folder_s_state(tmp_path):
    plan = WorkflowPlan(out="runs/a")
    fp = plan.add(spec("report", 1))
    plan.write_spec_files(tmp_path)
    assert SPEC_DIR == "results/.vertebrae/specs"
    assert plan.spec_file(fp).startswith("runs/a/.vertebrae/specs/") and (tmp_path / plan.spec_file(fp)).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # nothing beside the out folder
