"""The pages over the whole out folder on object storage (issue 47): with ``--storage``, planning lists the report
folders other configs wrote into the bucket's ``OUT/reports/`` (one listing, nothing downloaded), not the local copy
of the prefix, which holds only what this process fetched (or a stale folder from an earlier run). The leaderboard
and index jobs declare those files, by the same relative paths as every other input (the storage provider maps them
to objects under the prefix). Against moto's server on 127.0.0.1, as tests/workflow/test_storage_uploads.py."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from small_workflow import small_config, write
from vertebrae.core import storage
from vertebrae.planning import plan_once
from vertebrae.reports.report_page import REPORT_FOLDER_FILES, report_folders, report_folders_listed

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")
from moto_bucket import client, moto_bucket  # noqa: E402

BUCKET, PREFIX = "vertebrae-pages", "runs/pages"
URL = f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture(scope="module")
def s3_env():
    with moto_bucket(BUCKET) as env:
        yield env


@pytest.fixture(scope="module")
def stored(s3_env, tmp_path_factory) -> dict:
    """The bucket: a labelled benchmark's data under the prefix, another config's report folder (with a file no page
    reads and Snakemake's hidden one), a folder without a report.json, and this config's own report; the config."""
    data = tmp_path_factory.mktemp("pages-data")
    config = small_config(data)
    config.pop("retrieval")
    s3 = client(s3_env)
    for path in sorted(data.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), BUCKET, f"{PREFIX}/{path.relative_to(data).as_posix()}")
    for name in ("report.json", "report.md", "report.html", "ranking.html", "notes.txt", ".snakemake_timestamp"):
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/results/reports/other/{name}", Body=b"{}")
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/results/reports/no-json/report.md", Body=b"# x\n")
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/results/reports/models/report.json", Body=b"{}")  # its own: not other's
    return config


def _with_stale_copy(work: Path) -> Path:
    """A working folder whose local copy of the prefix holds a report folder the bucket does not (a stale one)."""
    stale = work / ".snakemake" / "storage" / "s3" / BUCKET / PREFIX / "results" / "reports" / "stale"
    stale.mkdir(parents=True)
    (stale / "report.json").write_text("{}", encoding="utf-8")
    return work


def test_planning_on_storage_declares_the_buckets_other_reports_not_the_local_copys(s3_env, stored, tmp_path,
                                                                                     monkeypatch):
    """Another config's report folder lies only in the bucket, a stale one only in the local copy: the plan (as
    ``vertebrae run --storage`` makes it) lists the bucket's, with the files the pages read, and the page jobs'
    declared inputs name it and not the stale one."""
    for name, value in s3_env.items():
        monkeypatch.setenv(name, value)
    for name in (storage.STORAGE_ROOT_ENV, plan_once.PLAN_ENV):  # plan_where_jobs_run sets both: undone after
        monkeypatch.setenv(name, "")  # recorded (a delenv of an unset variable is not, and would leak the value)
        monkeypatch.delenv(name)
    monkeypatch.chdir(_with_stale_copy(tmp_path / "work"))

    planned, root = plan_once.plan_where_jobs_run(copy.deepcopy(stored), storage_provider="s3", storage_prefix=URL)

    assert Path(root) == Path(".snakemake/storage/s3", BUCKET, PREFIX)
    assert planned.other_reports == {"other": ["report.json", "report.md", "report.html", "ranking.html"]}
    assert planned.page_reports() == ["results/reports/models/report.json", "results/reports/other/report.json"]
    assert planned.other_report_files(*REPORT_FOLDER_FILES) == [
        "results/reports/other/report.json", "results/reports/other/report.md", "results/reports/other/report.html",
        "results/reports/other/ranking.html"]
    assert not (Path(root) / "results" / "reports" / "other").exists()  # listed, not downloaded: the jobs get them


def test_the_page_jobs_retrieve_the_buckets_other_reports(s3_env, stored, tmp_path):
    """A dry run with ``--storage`` (~2 s): the leaderboard and index jobs' inputs, as Snakemake shows them, are the
    other report's objects, retrieved from storage as the config's own reports are; the stale copy is no input."""
    work = _with_stale_copy(tmp_path)
    write(work, stored)
    proc = subprocess.run([sys.executable, "-m", "vertebrae", "run", "config.yaml", "--storage", URL, "--cores", "1",
                           "-n"], cwd=work, env=s3_env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    inputs = {}
    lines = proc.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("rule leaderboard_page:", "localrule leaderboard_page:", "rule results_index:",
                            "localrule results_index:"):
            inputs[line.split()[-1].rstrip(":")] = lines[i + 1].strip().removeprefix("input: ").split(", ")
    assert sorted(inputs) == ["leaderboard_page", "results_index"], proc.stdout[-3000:]
    other = f"{URL}/results/reports/other"
    assert [p for p in inputs["leaderboard_page"] if p.startswith(other)] == [
        f"{other}/{name} (retrieve from storage)" for name in ("report.json", "report.md", "report.html",
                                                               "ranking.html")]
    assert [p for p in inputs["results_index"] if p.startswith(other)] == [
        f"{other}/{name} (retrieve from storage)" for name in ("report.json", "report.html")]
    assert f"{URL}/results/reports/models/report.json (retrieve from storage)" in inputs["results_index"]
    assert not any("stale" in p for p in inputs["leaderboard_page"] + inputs["results_index"])


def test_a_listing_reads_as_the_folder_it_lists(tmp_path):
    """``report_folders_listed`` (a bucket's listing) keeps exactly what ``report_folders`` (a folder's) keeps."""
    reports = tmp_path / "reports"
    files = ["a/report.json", "a/report.md", "a/warnings.html", "a/notes.txt", "a/sub/report.html", "b/report.md",
             ".hidden/report.json", "c/report.json", "c/.snakemake_timestamp"]
    for name in files:
        (reports / name).parent.mkdir(parents=True, exist_ok=True)
        (reports / name).write_text("{}", encoding="utf-8")
    assert report_folders_listed(files) == report_folders(tmp_path) == {
        "a": ["report.json", "report.md", "warnings.html"], "c": ["report.json"]}
