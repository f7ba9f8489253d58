"""Three configs run one after another into one results/ (issue 30): ``vertebrae leaderboard`` shows every benchmark
any of them wrote, with costs the jobs measured of themselves (carried in the reports); the long table reads back with pandas (CSV and
Parquet); a corrupt report is skipped with a line naming it; ``vertebrae validate`` takes several config files and
merges them as Snakemake does."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workflow_support import BIN, dry_run_jobs, snakemake

from vertebrae.cli.commands import merged_config
from vertebrae.core.provenance import software, software_line
from vertebrae.planning.plan_once import plan_digest, plans_dir
from vertebrae.results.base import with_content_hash

IDENTITY = {"kind": "declared", "revision": "1"}
IRIS = {"type": "sklearn", "name": "iris"}
CONFIGS = {
    # raw (dim 4) and a deliberately cheaper candidate: PCA to 2 dimensions. Three classes are too few paired units
    # for a per-class verdict, so rows are resampled: pca2 (0.63 against 0.87) is behind, and the cheapest candidate
    # tied with the leader is the leader itself.
    "a.yaml": {"seed": 0, "embedding": {"batch_size": 150}, "benchmarks": {"flowers": {
        "dataset": {"source": IRIS, "identity": {**IDENTITY, "name": "iris-a"}},
        "extractors": {"raw": {"type": "precomputed"},
                       "pca2": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                              "params": {"n_components": 2}}]}},
        "scoring": {"k": 5}}}},
    "b.yaml": {"seed": 0, "embedding": {"batch_size": 150}, "retrieval": {"iris_search": {
        "dataset": {"source": {"type": "label_split", "source": IRIS, "query_every": 5},
                    "identity": {**IDENTITY, "name": "iris-search"}},
        "shards": 1, "extractors": {"raw": {"type": "precomputed"}}}}},
    "c.yaml": {"seed": 0, "embedding": {"batch_size": 200}, "benchmarks": {"wine": {
        "dataset": {"source": {"type": "sklearn", "name": "wine"}, "identity": {**IDENTITY, "name": "wine"}},
        "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": 5},
        "row_resampling": {"resamples": 20}}}},  # wine's lone candidate: its 3 classes resample rows; 20, not 200
}
BENCHMARKS = ["flowers", "iris_search", "wine"]


def vertebrae(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"vertebrae {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One working directory where each config ran in turn (``vertebrae run X.yaml``)."""
    work = tmp_path_factory.mktemp("leaderboard")
    for name, config in CONFIGS.items():
        (work / name).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        vertebrae(work, "run", name, "--cores", "2")
    return work


def test_the_leaderboard_shows_every_config_and_reads_back_with_pandas(workdir):
    # the per-config summary holds only the last config; the leaderboard holds all three
    assert [b["name"] for b in json.loads((workdir / "results/summary/summary.json").read_text())["benchmarks"]] == [
        "wine"]
    long = pd.read_csv(io.StringIO(vertebrae(workdir, "leaderboard", "--format", "csv").stdout))
    assert sorted(set(long["benchmark"])) == BENCHMARKS
    assert list(long[long.benchmark == "flowers"].candidate) == ["raw", "pca2"]
    report = json.loads((workdir / "results/reports/flowers/report.json").read_text())
    scores = {c["name"]: c["primary_score"] for c in report["extractor_results"]}
    flowers = long[long.benchmark == "flowers"].set_index("candidate")
    assert flowers.loc["raw", "value"] == scores["raw"] and flowers.loc["pca2", "dim"] == 2
    assert flowers.loc["raw", "bytes_per_vector"] == 4 * 8  # four float64 values
    assert set(long.dataset_identity) == {"declared:iris-a@1", "declared:iris-search@1", "declared:wine@1"}
    # embedding cost, steady-state throughput inside the embed jobs: a precomputed file costs nothing to embed; 150
    # rows are too few rows to measure (no number, never a whole-job time); memory and scoring as the jobs measured them
    assert dict(zip(long.candidate, long.embed_status)) == {"raw": "precomputed", "pca2": "too few rows to measure"}
    assert (long[long.candidate == "raw"].embed_seconds_per_1k_rows == 0).all()
    assert long[long.candidate == "pca2"].embed_seconds_per_1k_rows.isna().all()
    # a job too short for Snakemake to sample leaves its peak unknown (never 0): every known peak is positive
    assert (long.peak_memory_mb.dropna() > 0).all() and long.peak_memory_mb.notna().sum() >= 2
    assert (long.score_seconds > 0).all()
    assert set(long.verdict) <= {"leader", "tied", "behind", "n/a"} and flowers.loc["pca2", "verdict"] == "behind"
    page = vertebrae(workdir, "leaderboard", "--cost", "dim").stdout
    assert "cheapest candidate statistically tied with the leader (by dim): raw (dim 4; leader raw: dim 4)" in page
    assert all(f"## Quality vs cost: {name}" in page for name in BENCHMARKS)
    assert page.rstrip("\n").splitlines()[-1] == software_line(software())  # which vertebrae wrote it, as reports say
    vertebrae(workdir, "leaderboard", "--format", "parquet", "--output", "lb.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(workdir / "lb.parquet")[["benchmark", "candidate", "value"]],
                                  long[["benchmark", "candidate", "value"]])
    vertebrae(workdir, "leaderboard", "--format", "html", "--cost", "dim", "--output", "results/leaderboard.html")
    html = (workdir / "results/leaderboard.html").read_text(encoding="utf-8")
    assert html.count("<svg") == 3 and "cheapest candidate statistically tied with the leader (by dim): raw" in html
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert {f"reports/{name}/{page}.html" for name in BENCHMARKS for page in ("report", "ranking")} <= set(hrefs)
    assert all((workdir / "results" / href).is_file() for href in hrefs)
    assert f"<p>{software_line(software())}</p>" in html


def _recorded(workdir: Path, output: str) -> dict:
    """Snakemake's record of the job that last wrote ``output`` (its shell line, declared inputs)."""
    name = base64.b64encode(output.encode()).decode().replace("/", "@")
    return json.loads((workdir / ".snakemake" / "metadata" / name).read_text(encoding="utf-8"))


def test_the_pages_list_every_config_from_declared_inputs_only(workdir, tmp_path):
    # issue 47: the last config's pages list the benchmarks the first two wrote, read as declared inputs (its plan
    # lists the out folder's report folders) and handed to the job by name
    html = (workdir / "results/leaderboard.html").read_text(encoding="utf-8")
    index = (workdir / "results/index.html").read_text(encoding="utf-8")
    assert all(f'href="reports/{name}/report.html"' in page for name in BENCHMARKS for page in (html, index))
    assert "pca2" in html  # a candidate of the first config
    board, listing = _recorded(workdir, "results/leaderboard.html"), _recorded(workdir, "results/index.html")
    theirs = {f"results/reports/{name}/{file}" for name in ("flowers", "iris_search")
              for file in ("report.json", "report.md", "report.html", "ranking.html", "warnings.html")}
    assert theirs <= set(board["input"]) and "--reports" in board["shellcmd"]
    assert {f"results/reports/{name}/{file}" for name in ("flowers", "iris_search") for file in
            ("report.json", "report.html")} <= set(listing["input"]) and "--reports" in listing["shellcmd"]
    # a report another config writes into the folder (here: a copy of wine's under another name) changes the input
    # set of the last config's pages: its dry run reruns them, and nothing else
    copy = tmp_path / "work"
    shutil.copytree(workdir, copy, symlinks=True)
    shutil.copytree(copy / "results/reports/wine", copy / "results/reports/wine_copy")
    dry = snakemake(copy, "--configfile", "c.yaml", "-n").stdout
    jobs = {rule for rule, _ in dry_run_jobs(dry)}
    assert jobs - {"all"} == {"leaderboard_page", "results_index"}, jobs
    assert "--reports results/reports/flowers/report.json results/reports/iris_search/report.json " \
           "results/reports/wine/report.json results/reports/wine_copy/report.json >" in dry
    # the job reads exactly the reports it is given: another one in the folder is not read
    proc = vertebrae(workdir, "leaderboard", "results", "--format", "csv", "--reports",
                     "results/reports/flowers/report.json")
    assert sorted(set(pd.read_csv(io.StringIO(proc.stdout)).benchmark)) == ["flowers"]


def test_a_corrupt_report_is_skipped_with_a_line_naming_it(workdir, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(workdir / "results", copy, ignore=shutil.ignore_patterns("benchmarks"))  # no records
    bad = copy / "reports/wine/report.json"
    bad.write_text(bad.read_text()[:-40])  # cut short: not JSON
    proc = vertebrae(tmp_path, "leaderboard", "--format", "csv")
    assert f"skipped {Path('results/reports/wine/report.json')}" in proc.stderr
    assert sorted(set(pd.read_csv(io.StringIO(proc.stdout)).benchmark)) == ["flowers", "iris_search"]
    assert bad.is_file()  # never moved by the leaderboard
    given = vertebrae(tmp_path, "leaderboard", "results", "--format", "csv", "--reports",  # as the workflow's job
                      *(str(p.relative_to(tmp_path)) for p in sorted(copy.glob("reports/*/report.json"))))
    assert f"skipped {Path('results/reports/wine/report.json')}" in given.stderr and given.stdout == proc.stdout
    # no benchmark records in or beside this copy: the costs come from the reports, which carry them
    long = pd.read_csv(io.StringIO(proc.stdout))
    raw = long.candidate == "raw"  # precomputed: 0; pca2: too few rows to measure, no number
    assert (long[raw].embed_seconds_per_1k_rows == 0).all() and long[~raw].embed_seconds_per_1k_rows.isna().all()
    assert (long.score_seconds > 0).all() and (long.dim > 0).all()
    # a report written without records (an older report.json, or the report job without benchmarks/): unknown, not 0
    for path in copy.glob("reports/*/report.json"):
        if path != bad:
            document = json.loads(path.read_text())
            for candidate in document["extractor_results" if "extractor_results" in document else "candidate_results"]:
                del candidate["metadata"]["cost"]
            document.pop("content_hash")
            path.write_text(json.dumps(with_content_hash(document)))
    long = pd.read_csv(io.StringIO(vertebrae(tmp_path, "leaderboard", "--format", "csv").stdout))
    assert long.embed_seconds_per_1k_rows.isna().all() and long.score_seconds.isna().all() and (long.dim > 0).all()


def test_validate_takes_several_config_files(workdir):
    plans = workdir / plans_dir({})
    before = set(plans.glob("*.json"))
    out = vertebrae(workdir, "validate", "a.yaml", "c.yaml").stdout
    assert out.startswith("a.yaml c.yaml: valid; 2 benchmarks")
    assert "labelled benchmark flowers" in out and "labelled benchmark wine" in out
    assert "jobs to run now:" in out
    # validate plans once: its plan is named by the digest Snakemake's dry run computes from the config it merged
    # (the same files, merged the same way), so the dry run reads it back and writes no plan of its own
    files = ["a.yaml", "c.yaml"]
    ours = plans / f"{plan_digest(merged_config([workdir / f for f in files]), [workdir / f for f in files], workdir)}.json"
    assert ours.is_file() and set(plans.glob("*.json")) - before <= {ours}


def _on_a_terminal(cwd: Path, *args: str) -> str:
    """What ``vertebrae ARGS`` writes to stdout when stdout is a terminal (a pseudo-terminal read back)."""
    import os
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, stdout=slave, stderr=subprocess.PIPE,
                              timeout=600)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.returncode == 0, proc.stderr
    return b"".join(chunks).decode("utf-8")


def test_a_terminal_gets_no_control_character_from_a_report(workdir, tmp_path):
    shutil.copytree(workdir / "results", tmp_path / "results")
    path = tmp_path / "results/reports/wine/report.json"
    hostile = "wine\x1b[2J\x9b31m\u202egnp.exe"
    document = json.loads(path.read_text().replace('"wine"', json.dumps(hostile)))  # its benchmark and identity names
    document.pop("content_hash")
    path.write_text(json.dumps(with_content_hash(document)))
    piped = vertebrae(tmp_path, "leaderboard", "--format", "csv")  # a file gets the csv as it is
    assert hostile in piped.stdout, piped.stderr
    shown = _on_a_terminal(tmp_path, "leaderboard", "--format", "csv")
    assert not any(c in shown for c in "\x1b\x9b\u202e")
    assert "wine\\x1b[2J\\x9b31m\\u202egnp.exe" in shown


def test_status_show_and_leaderboard_print_json_that_matches_their_text(workdir):
    # issue 45: machine-readable output where asked
    status = json.loads(vertebrae(workdir, "status", "c.yaml", "--json").stdout)
    text = vertebrae(workdir, "status", "c.yaml").stdout.splitlines()[0]
    assert text.startswith(f"c.yaml: 1 benchmark; {status['jobs']} jobs: {status['done']} done, {status['to_run']} to run")
    wine = next(b for b in status["benchmarks"] if b["name"] == "wine")
    assert (wine["section"], wine["kind"]) == ("benchmarks", "labelled") and wine["to_run"] == 0
    assert sum(rule["done"] for rule in wine["rules"].values()) == wine["done"] == wine["jobs"]
    shown = json.loads(vertebrae(workdir, "show", "a.yaml", "--json").stdout)["benchmarks"]
    assert [b["name"] for b in shown] == ["flowers"] and shown[0]["report"]["state"] == "written"
    assert {c["name"] for c in shown[0]["candidates"]} == {"raw", "pca2"} == set(shown[0]["ranking"])
    assert all(c["state"] == "written" and len(c["fingerprint"]) == 16 for c in shown[0]["candidates"])
    board = json.loads(vertebrae(workdir, "leaderboard", "--format", "json").stdout)
    long = pd.read_csv(io.StringIO(vertebrae(workdir, "leaderboard", "--format", "csv").stdout))
    assert len(board["rows"]) == len(long) and sorted({r["benchmark"] for r in board["rows"]}) == BENCHMARKS
    assert {s["candidate"] for s in board["across"]["standings"]} >= {"raw"}


@pytest.mark.parametrize("args", [("status", "c.yaml"), ("show", "a.yaml"), ("leaderboard",)],
                         ids=["status", "show", "leaderboard"])
def test_a_closed_pipe_ends_a_command_quietly(workdir, args):
    # issue 45: `vertebrae status | head -1` ended in a BrokenPipeError traceback; the reader here is gone before
    # the first write, so every write fails as it does once head has its line
    import os

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=workdir, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=600)
    finally:
        os.close(write)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
