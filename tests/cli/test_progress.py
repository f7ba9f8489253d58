"""The progress display of ``vertebrae run`` / ``eval`` (``vertebrae.cli.progress``) on Snakemake's text: the job
table, started, finished and failed jobs, the time left from earlier benchmark records, a failed job's error line
first, and the plain lines of a run that is not on a terminal. The real runs are in
tests/workflow/test_run_progress.py."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from vertebrae.cli import progress
from vertebrae.cli.commands import _passes_through, _workdir
from vertebrae.cli.progress import (PlainDisplay, RunState, duration, error_line, failure_report, record_seconds,
                                    status_line, watch)

# Snakemake 9's text for a run of 3 plan jobs, 2 embedding shards (one fails) and the target rule, as it prints it
START = """\
Using workflow specific profile /w/profiles/default for setting default command line arguments.
Building DAG of jobs...
Provided cores: 2
Rules claiming more threads will be scaled down.
Job stats:
job            count
-----------  -------
plan               3
embed_shard        2
all                1
total              6

Select jobs to execute...
[Sun Dec  6 10:09:07 2026]
localrule plan:
    input: results/.vertebrae/specs/aaa.json
    output: results/plans/aaa.json
    log: results/logs/plan/aaa.log
    jobid: 13
    benchmark: results/benchmarks/plan/aaa.tsv
    reason: Missing output files: results/plans/aaa.json
    wildcards: fp=aaa
Shell command: vertebrae plan --spec-file results/.vertebrae/specs/aaa.json > results/logs/plan/aaa.log 2>&1
"""
FINISH_PLAN = """\
[Sun Dec  6 10:09:08 2026]
Finished jobid: 13 (Rule: plan)
1 of 6 steps (17%) done
"""
SHARD = """\
[Sun Dec  6 10:09:09 2026]
rule embed_shard:
    input: results/plans/bbb.json
    output: results/embeddings/bbb/shard-0-of-1.h5
    log: results/logs/embed_shard/bbb/shard-0-of-1.log
    jobid: 16
    benchmark: results/benchmarks/embed_shard/bbb/shard-0-of-1.tsv
    wildcards: fp=bbb, i=0, n=1
Shell command: vertebrae embed-shard ...
"""
FAIL_SHARD = """\
[Sun Dec  6 10:10:26 2026]
Error in rule embed_shard:
    message: None
    jobid: 16
    input: results/plans/bbb.json
    log: results/logs/embed_shard/bbb/shard-0-of-1.log (check log file(s) for error details)
    shell:
        vertebrae embed-shard --plan-json results/plans/bbb.json > results/logs/embed_shard/bbb/shard-0-of-1.log 2>&1
        (command exited with non-zero exit code)
Logfile results/logs/embed_shard/bbb/shard-0-of-1.log:
"""


def feed(state: RunState, text: str, now: float = 0.0) -> list[str]:
    events = []
    for line in text.splitlines():
        events += state.feed(line, now)
    return events


def record(path: Path, seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:01\t10.0\n", encoding="utf-8")


def test_the_state_follows_the_job_table_and_the_jobs(tmp_path):
    state = RunState(root=tmp_path)
    assert feed(state, START, now=1.0) == ["stats"]
    assert state.totals == {"plan": 3, "embed_shard": 2, "all": 1} and state.total == 6 and state.cores == 2
    # the line after a job's block (here its shell command) closes it: the job runs from then on
    assert list(state.running) == [13] and state.running[13].logs == ["results/logs/plan/aaa.log"]
    assert state.running[13].benchmark == "results/benchmarks/plan/aaa.tsv"
    feed(state, FINISH_PLAN, now=4.0)
    assert state.finished == 1 and state.done["plan"] == 1 and not state.running
    assert state.durations == {"plan": [3.0]}
    assert status_line(state, now=4.0, started=0.0) == ("1/6 jobs done (plan 1/3, embed_shard 0/2), 4s elapsed, "
                                                         "~12s left")  # no records: 3 s a job, as the one done
    feed(state, SHARD, now=5.0)
    assert feed(state, FAIL_SHARD, now=9.0) == ["failed"]
    assert state.failed == [("embed_shard", 16, ["results/logs/embed_shard/bbb/shard-0-of-1.log"])] and not state.running


def test_a_group_jobs_indented_members_are_counted():
    state = RunState()
    feed(state, START)
    feed(state, "    rule embed_shard:\n        jobid: 7\n        log: x.log\n    rule embed_shard:\n        jobid: 8\n"
                "[date]\n", now=1.0)
    assert sorted(state.running) == [7, 8, 13]
    feed(state, "    Finished jobid: 7 (Rule: embed_shard)\n")
    assert state.done["embed_shard"] == 1


def test_time_left_comes_from_earlier_benchmark_records(tmp_path):
    record(tmp_path / "results/benchmarks/plan/old1.tsv", 2.0)
    record(tmp_path / "results/benchmarks/plan/old2.tsv", 4.0)
    record(tmp_path / "results/benchmarks/embed_shard/x/shard-0-of-1.tsv", 30.0)
    state = RunState(root=tmp_path)
    feed(state, START, now=0.0)
    assert state.prior == {"plan": 3.0, "embed_shard": 30.0}
    feed(state, "[date]\n", now=0.0)
    # the running plan job has no record of its own: its rule's mean; 2 plans + 2 shards wait; 2 cores, none done yet
    # so one job at a time is assumed (one is running): 3 + 2 * 3 + 2 * 30 = 69 s at t = 0
    assert state.time_left(0.0) == pytest.approx(69.0)
    assert state.time_left(1.0) == pytest.approx(68.0)
    assert "~1m08s left" in status_line(state, 1.0, 0.0)
    record(tmp_path / "results/benchmarks/embed_shard/bbb/shard-0-of-1.tsv", 10.0)  # this job's own earlier record
    feed(state, FINISH_PLAN + SHARD + "[date]\n", now=3.0)
    assert state.running[16].expected == 10.0


def test_without_records_the_time_left_waits_for_this_runs_jobs(tmp_path):
    state = RunState(root=tmp_path)
    feed(state, START + "[date]\n", now=0.0)
    assert state.time_left(1.0) is None and "left" not in status_line(state, 1.0, 0.0)
    feed(state, FINISH_PLAN, now=2.0)  # plan took 2 s; the shards have no estimate: the median of the known ones
    assert state.time_left(2.0) == pytest.approx(2 * 2.0 + 2 * 2.0)


def test_a_benchmark_record_is_its_mean_seconds(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("s\th:m:s\n1.5\t0:00:01\n2.5\t0:00:02\n", encoding="utf-8")
    assert record_seconds(path) == 2.0
    assert record_seconds(tmp_path / "missing.tsv") is None
    (tmp_path / "bad.tsv").write_text("s\nNaN-ish\n", encoding="utf-8")
    assert record_seconds(tmp_path / "bad.tsv") is None


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0.4, 45, 80, 3599, 7500)] == ["0s", "45s", "1m20s", "59m59s", "2h05m"]


def test_a_failed_jobs_error_line_comes_first_then_its_logs_last_lines(tmp_path):
    log = tmp_path / "results/logs/score/x.log"
    log.parent.mkdir(parents=True)
    log.write_text("loading\nTraceback (most recent call last):\n  File \"m.py\", line 3, in f\n"
                   "ValueError: metric 'boom' raised\n", encoding="utf-8")
    lines = failure_report("score", 5, ["results/logs/score/x.log"], tmp_path)
    assert lines[0] == "vertebrae: job failed: score (jobid 5); its log: results/logs/score/x.log"
    assert lines[1] == "  ValueError: metric 'boom' raised"
    assert lines[2] == "  last lines of its log:" and lines[-1] == "    ValueError: metric 'boom' raised"
    assert error_line(["x", "vertebrae: error: bad row 5", "done"]) == "vertebrae: error: bad row 5"
    assert error_line(["a", "b", ""]) == "b" and error_line([]) is None
    log.write_text("vertebrae: error: endpoint 'samples': NaN in row 5\n", encoding="utf-8")
    assert failure_report("score", 5, ["results/logs/score/x.log"], tmp_path)[1:] == [
        "  vertebrae: error: endpoint 'samples': NaN in row 5"]
    assert "no log file" in failure_report("all", None, [], tmp_path)[0]
    assert failure_report("score", 5, ["results/logs/none.log"], tmp_path)[1] == "  (its log file could not be read)"


def test_plain_lines_come_every_interval_while_jobs_finish(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_EVERY", 30.0)
    monkeypatch.setattr(progress, "HEARTBEAT", 600.0)
    out = io.StringIO()
    display = PlainDisplay(out)
    state = RunState(root=tmp_path)
    display.update(state, 0.0, 0.0)  # no job table yet: nothing to say
    feed(state, START + "[date]\n", now=1.0)
    display.update(state, 1.0, 0.0)
    assert out.getvalue() == ""  # the job table was announced by its own line
    feed(state, FINISH_PLAN, now=5.0)
    display.update(state, 5.0, 0.0)
    assert out.getvalue() == ""  # too soon after the last line
    display.update(state, 40.0, 0.0)
    assert out.getvalue().splitlines() == ["1/6 jobs done (plan 1/3, embed_shard 0/2), 40s elapsed, ~16s left"]
    display.update(state, 80.0, 0.0)  # nothing finished since: no line until the heartbeat
    assert len(out.getvalue().splitlines()) == 1
    display.update(state, 641.0, 0.0)
    assert len(out.getvalue().splitlines()) == 2


def test_watch_logs_snakemakes_output_and_reports_a_failed_job(tmp_path):
    """``watch`` on a stand-in for Snakemake (a script printing its text): the log file holds every line, the
    screen has the job table's line, the failure with its error line and the outcome naming the log."""
    (tmp_path / "results/logs/embed_shard/bbb").mkdir(parents=True)
    (tmp_path / "results/logs/embed_shard/bbb/shard-0-of-1.log").write_text("vertebrae: error: row 5 is NaN\n")
    script = tmp_path / "fake.py"
    script.write_text(f"import sys\nsys.stderr.write({START + FINISH_PLAN + SHARD + FAIL_SHARD!r})\n"
                      "print('Exiting because a job execution failed.')\nsys.exit(1)\n")
    out = io.StringIO()
    code = watch([sys.executable, str(script)], None, resume="vertebrae run my.yaml", root=tmp_path, stream=out)
    assert code == 1
    lines = out.getvalue().splitlines()
    logs = list((tmp_path / "results/logs/snakemake").iterdir())
    assert len(logs) == 1 and "Exiting because a job execution failed." in logs[0].read_text()
    shown = str(logs[0])  # Snakemake's folder given by its full path: so is the log
    assert lines[0].startswith("vertebrae: 6 jobs to run (plan 3, embed_shard 2); Snakemake's log: " + shown)
    assert lines[1:3] == ["vertebrae: job failed: embed_shard (jobid 16); its log: results/logs/embed_shard/bbb/shard-0-of-1.log",
                          "  vertebrae: error: row 5 is NaN"]
    assert lines[-1].startswith("vertebrae: 1/6 jobs done, 1 failed (embed_shard); Snakemake's log: " + shown)
    assert lines[-1].endswith("the same command resumes (finished jobs are kept): vertebrae run my.yaml")


def test_a_job_failed_by_the_same_ctrl_c_is_not_reported_as_a_failure(tmp_path):
    """Ctrl-C reaches Snakemake's jobs too, and they can fail before vertebrae handles it: a failure seen less than
    ``FAILURE_GRACE`` before the interrupt is not shown as one (the outcome says the run was interrupted); failing on
    the old code, which printed it as it was read."""
    import threading
    import _thread

    script = tmp_path / "fake.py"
    script.write_text(f"import sys, time\nsys.stderr.write({START + FINISH_PLAN + SHARD + FAIL_SHARD!r})\n"
                      "sys.stderr.flush()\ntime.sleep(2)\nsys.exit(1)\n")
    out = io.StringIO()
    timer = threading.Timer(0.5, _thread.interrupt_main)  # the user's Ctrl-C, while the failure is pending
    timer.start()
    try:
        code = watch([sys.executable, str(script)], None, resume="vertebrae run my.yaml", root=tmp_path, stream=out)
    finally:
        timer.cancel()
    lines = out.getvalue().splitlines()
    assert code == 1 and not [line for line in lines if "job failed" in line], lines
    assert lines[-2].startswith("vertebrae: interrupted after "), lines


def test_a_run_that_stops_before_any_job_prints_snakemakes_last_lines(tmp_path):
    script = tmp_path / "fake.py"
    script.write_text("import sys\nprint('Building DAG of jobs...')\n"
                      "print('vertebrae: error: config key benchmarks.x: bad', file=sys.stderr)\nsys.exit(1)\n")
    out = io.StringIO()
    assert watch([sys.executable, str(script)], None, resume="r", root=tmp_path, stream=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"vertebrae: Snakemake stopped (exit status 1); its log: {tmp_path}/results/logs/snakemake/")
    assert lines[-1] == "vertebrae: error: config key benchmarks.x: bad"


def test_nothing_to_be_done_is_said_as_snakemake_says_it(tmp_path):
    script = tmp_path / "fake.py"
    script.write_text("print('Building DAG of jobs...')\n"
                      "print('Nothing to be done (all requested files are present and up to date).')\n")
    out = io.StringIO()
    assert watch([sys.executable, str(script)], None, resume="r", root=tmp_path, stream=out) == 0
    assert out.getvalue() == "Nothing to be done (all requested files are present and up to date).\n"


def test_which_snakemake_arguments_show_its_own_output():
    assert all(_passes_through(args) for args in (["--summary"], ["--cores", "2", "--unlock"], ["--version"],
                                                  ["--quiet", "rules"], ["--verbose"], ["--report=r.html"]))
    assert not any(_passes_through(args) for args in ([], ["--cores", "2"], ["--profile", "slurm"],
                                                      ["--forcerun", "score"], ["--keep-going"]))
    assert _workdir(["--cores", "2"]) == Path(".")
    assert _workdir(["--directory", "w"]) == _workdir(["-d", "w"]) == _workdir(["--directory=w"]) == Path("w")
