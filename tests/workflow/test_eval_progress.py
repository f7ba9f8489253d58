"""``vertebrae eval`` (and ``vertebrae run`` under it) shows a progress display, not Snakemake's log (issue 45): on a
small data set, outside a terminal (captured, as in CI), it prints at most 40 lines in all, stdout and stderr
together and the progress lines counted, and ends with the ranking and the verdicts; Snakemake's log is in the file
under results/logs/snakemake/ that it names. ``--verbose`` prints Snakemake's log as before. A failing job's error line is
on screen, with its log and Snakemake's; an interrupted run (Ctrl-C) says how to resume, and the same command does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_iris

from workflow_support import BIN

MAX_LINES = 40
EVAL = [str(BIN / "vertebrae"), "eval", "--protocol", "labelled", "--data", "sklearn:iris", "--model",
        "precomputed:a.npy", "--model", "precomputed:b.npy", "--cores", "2"]
LOG = re.compile(r"results/logs/snakemake/[\w.:-]+\.log")


def _data(folder: Path, nan_row: int | None = None) -> Path:
    """Two candidates for iris: its features and a random 3-d projection (row ``nan_row`` of it NaN)."""
    folder.mkdir(parents=True, exist_ok=True)
    features = load_iris().data.astype("float32")
    projected = features @ np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    if nan_row is not None:
        projected[nan_row, 1] = np.nan
    np.save(folder / "a.npy", features)
    np.save(folder / "b.npy", projected)
    return folder


def _eval(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*EVAL, *extra], cwd=folder, capture_output=True, text=True, timeout=600)


def _screen(proc: subprocess.CompletedProcess) -> list[str]:
    return (proc.stdout + proc.stderr).splitlines()


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    folder = _data(tmp_path_factory.mktemp("eval-progress"))
    return folder, _eval(folder)


def test_eval_prints_a_few_lines_and_ends_with_the_ranking(evaluated):
    folder, proc = evaluated
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    screen = _screen(proc)
    assert len(screen) <= MAX_LINES, "\n".join(screen)  # today's code printed 449 lines here
    assert "Job stats" not in proc.stdout + proc.stderr and "localrule" not in proc.stdout + proc.stderr
    # the progress display is on stderr: what the jobs are, where Snakemake's log went, and that all are done
    progress = proc.stderr.splitlines()
    assert re.match(r"vertebrae: \d+ jobs to run \(plan \d+, embed_shard 2, ", progress[0]), progress
    assert re.fullmatch(r"vertebrae: (\d+)/\1 jobs done in \d+s; Snakemake's log: " + LOG.pattern, progress[-1])
    log = folder / LOG.search(progress[0]).group(0)
    text = log.read_text(encoding="utf-8")
    assert "Job stats:" in text and "rule embed_shard:" in text and "Finished jobid" in text
    # stdout: the ranking and the verdicts, as before, and nothing else
    out = proc.stdout.strip().splitlines()
    assert out[0].startswith("iris (labelled; config results/eval/iris.yaml") and out[1] == "## Ranking"
    assert any(line.startswith("| 1 | a.npy ") for line in out) and "## Is the leader really ahead?" in out
    # three classes: the verdict comes from matched row subsamples, and the random projection is behind the leader
    assert any(line.startswith("| b.npy | ") and line.rstrip().endswith("| behind |") for line in out)
    assert any(line.startswith("**Row-resampled comparison**") for line in out)


def test_a_second_eval_has_nothing_to_do_and_says_so(evaluated):
    folder, _ = evaluated
    again = _eval(folder)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.splitlines() == ["Nothing to be done (all requested files are present and up to date)."]
    assert "## Ranking" in again.stdout


def test_verbose_prints_snakemakes_log(evaluated):
    folder, _ = evaluated
    for report in (folder / "results" / "reports" / "iris").iterdir():
        report.unlink()
    logs = set((folder / "results" / "logs" / "snakemake").iterdir())
    proc = _eval(folder, "--verbose")
    assert proc.returncode == 0, proc.stderr[-3000:]
    screen = proc.stdout + proc.stderr
    assert "Job stats:" in screen and re.search(r"^(local)?rule report:$", screen, re.M), screen[-3000:]
    assert "jobs to run" not in screen and set((folder / "results" / "logs" / "snakemake").iterdir()) == logs
    assert "## Ranking" in proc.stdout


def test_a_failed_job_shows_its_error_line_and_the_logs(tmp_path):
    folder = _data(tmp_path / "nan", nan_row=5)
    proc = _eval(folder)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    screen = _screen(proc)
    assert len(screen) <= MAX_LINES, "\n".join(screen)
    failed = next(i for i, line in enumerate(screen) if line.startswith("vertebrae: job failed: embed_shard"))
    assert re.search(r"its log: results/logs/embed_shard/\w+/shard-0-of-1\.log$", screen[failed])
    assert screen[failed + 1] == ("  vertebrae: error: endpoint 'samples' embeddings from extractor 'b.npy': 1 row(s) "
                                  "contain NaN or infinite values: row id 5 (index 5)")
    last = screen[-1]
    assert last.startswith("vertebrae: ") and "1 failed (embed_shard); Snakemake's log: results/logs/snakemake/" in last
    assert last.endswith(f"(finished jobs are kept): vertebrae eval {' '.join(EVAL[2:])}")
    assert "## Ranking" not in proc.stdout


def test_an_interrupted_eval_says_how_to_resume_and_that_command_resumes(tmp_path):
    folder = _data(tmp_path / "interrupted")
    # its own process group, which Ctrl-C reaches (vertebrae and Snakemake), with SIGINT's default action as in a
    # terminal: a suite started in the background (`cmd &` without job control) ignores SIGINT, and an ignored
    # signal stays ignored across exec
    proc = subprocess.Popen(EVAL, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stderr.readline()
        assert "jobs to run" in first, first
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, out + err
    lines = err.splitlines()
    assert any(line.startswith("vertebrae: interrupted after ") and line.endswith(
        f"Resume with the same command (finished jobs are kept): vertebrae eval {' '.join(EVAL[2:])}")
        for line in lines), err
    assert "Traceback" not in err and "## Ranking" not in out
    assert not [line for line in lines if "job failed" in line], err  # its jobs' KeyboardInterrupt is no failure
    resumed = _eval(folder)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "## Ranking" in resumed.stdout
