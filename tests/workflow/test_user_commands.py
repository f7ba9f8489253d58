"""``vertebrae status`` and ``vertebrae show`` on a user's config, and the workflow's cross-benchmark summary (issue 18,
problem 10): a tiny config is run once; status then says everything is done, an edited config shows exactly the
jobs Snakemake's own dry run would start (with Snakemake's reasons), and show lists the plan and the written
ranking."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from vertebrae.planning import plan
from vertebrae.planning.config import load_config_file
from workflow_support import BIN, USER_CONFIG, job_counts

# the README's user config with one shard (150 rows in one batch): the fewest jobs that still hold every stage
CONFIG = {**USER_CONFIG, "embedding": {"batch_size": 150}}


def vertebrae(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"vertebrae {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    """A working directory where ``vertebrae run mine.yaml`` has run to the end."""
    workdir = tmp_path_factory.mktemp("user-commands")
    write(workdir / "mine.yaml", CONFIG)
    vertebrae(workdir, "run", "mine.yaml", "--cores", "2")
    return workdir


def rule_rows(stdout: str) -> dict[str, tuple[int, int, str]]:
    """rule -> (done, to run, why) from the rule tables status prints (every section, summed)."""
    rows: dict[str, tuple[int, int, str]] = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"    (\w+)\s+(\d+)\s+(\d+)\s*(.*)", line)
        if match:
            rule, done, todo, why = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
            before = rows.get(rule, (0, 0, ""))
            rows[rule] = (before[0] + done, before[1] + todo, why or before[2])
    return rows


def test_the_workflow_writes_the_summary_and_status_says_all_done(done):
    summary = done / "results" / "summary"
    report = json.loads((done / "results/reports/my_iris/report.json").read_text(encoding="utf-8"))
    score = report["extractor_results"][0]["primary_score"]
    assert (summary / "summary.csv").read_text(encoding="utf-8") == (
        f"candidate,my_iris (overlap),my_iris rank\nraw,{score!r},1\n")
    assert json.loads((summary / "summary.json").read_text())["benchmarks"][0]["name"] == "my_iris"
    assert f"| raw | {score:.4f} (#1) |" in (summary / "summary.md").read_text(encoding="utf-8")

    proc = vertebrae(done, "status", "mine.yaml")
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"mine\.yaml: 1 benchmark; (\d+) jobs: \1 done, 0 to run \(everything is up to date\)",
                        lines[0]), lines[0]
    assert lines[1].startswith("  labelled benchmark my_iris (benchmarks.my_iris): ")
    rows = rule_rows(proc.stdout)
    assert rows["embed_shard"] == (1, 0, "") and rows["score"] == (1, 0, "") and rows["summary"] == (1, 0, "")
    assert all(todo == 0 for _, todo, _ in rows.values())


def test_status_after_an_edit_names_the_jobs_to_rerun_and_why(done):
    edited = {**CONFIG, "benchmarks": {"my_iris": {**CONFIG["benchmarks"]["my_iris"], "scoring": {"k": 6}}}}
    write(done / "edited.yaml", edited)
    proc = vertebrae(done, "status", "edited.yaml")
    rows = rule_rows(proc.stdout)
    # the oracle: Snakemake's own dry run of the edited config (`all` is no job of a benchmark)
    dry = job_counts(vertebrae(done, "run", "edited.yaml", "-n", "--quiet", "rules").stdout)
    dry.pop("all")
    assert {rule: todo for rule, (_, todo, _) in rows.items() if todo} == dry
    assert rows["embed_shard"] == (1, 0, "") and rows["write_protocol"] == (1, 0, "")  # the data side is done
    assert rows["score"] == (0, 1, "missing output (1)")  # a new fingerprint: a new file
    assert rows["report"] == (0, 1, "set of input files changed (1)")  # another score file
    assert rows["summary"] == (0, 1, "an input is updated by another job (1)")
    first = proc.stdout.splitlines()[0]
    assert first.endswith(f"{sum(dry.values())} to run (`vertebrae run edited.yaml` runs them)"), first

    shown = vertebrae(done, "show", "edited.yaml").stdout
    assert "(written, out of date: a score it needs is not yet written)" in shown


def test_show_lists_the_plan_and_the_written_ranking(done):
    planned = plan(load_config_file(done / "mine.yaml"), base_dir=done)
    candidate = planned.spec(planned.reports["my_iris"])["candidates"][0]
    shown = vertebrae(done, "show", "mine.yaml", "my_iris").stdout.splitlines()
    assert shown[:5] == [
        "labelled benchmark my_iris (benchmarks.my_iris)",
        "  dataset: declared:my-iris@1",
        f"  protocol: {planned.spec(planned.reports['my_iris'])['protocol']['path']} (written)",
        "  report: results/reports/my_iris/report.json, results/reports/my_iris/report.md (written)",
        "  1 candidate (name, score fingerprint, score file):",
    ]
    assert shown[5] == f"    raw  {candidate['score']['fingerprint']}  {candidate['score']['path']} (written)"
    markdown = (done / "results/reports/my_iris/report.md").read_text(encoding="utf-8")
    table = [line for line in markdown.splitlines() if line.startswith("| 1 | raw |")]
    assert table and f"    {table[0]}" in shown  # the report's own ranking row

    proc = vertebrae(done, "show", "mine.yaml", "nope", check=False)
    assert proc.returncode == 2 and "no benchmark 'nope'; its benchmarks: my_iris" in proc.stderr


def test_show_prints_text_from_data_safely_for_a_terminal(tmp_path, monkeypatch, capsys):
    # issue 32: show printed the dataset identity and the ranking read from report.md raw: an escape sequence in
    # them cleared the screen, set the title or reordered the line (a bidirectional override) on the user's terminal
    from vertebrae.cli import main

    hostile = "evil\x1b[2J\x1b]0;title\x07\x9b31m\u202eend\rline"
    config = {"benchmarks": {"tiny": {**USER_CONFIG["benchmarks"]["my_iris"], "dataset": {
        "source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "declared", "name": hostile, "revision": "1"}}}}}
    write(tmp_path / "cfg.yaml", config)
    report = tmp_path / "results/reports/tiny/report.md"
    report.parent.mkdir(parents=True)
    report.write_text("# tiny\n\n## Ranking\n\n| 1 | raw\x1b[8m | 0.9\u202e |\n\n## Detail\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["show", "cfg.yaml"]) == 0
    out = capsys.readouterr().out
    assert all(line.isprintable() for line in out.splitlines()), out
    assert "  dataset: declared:evil\\x1b[2J\\x1b]0;title\\x07\\x9b31m\\u202eend\\rline@1" in out.splitlines()
    assert "    | 1 | raw\\x1b[8m | 0.9\\u202e |" in out.splitlines()

