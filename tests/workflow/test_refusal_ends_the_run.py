"""A config vertebrae refuses, run through Snakemake (issue 48): our one message is the end of the output, the exit
status nonzero, and no stack trace follows it (Snakemake used to print "ConfigError in file .../common.smk" and
the frames of the planner after it). An empty config says what it lacks, naming the file."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from workflow_support import BIN, snakemake, unactivated_env

BAD = {"benchmarks": {"flowers": {"dataset": {"source": {"type": "sklearn", "name": "iris"},
                                              "identity": {"kind": "content"}},
                                  "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": -3}}}}
BAD_MESSAGE = "vertebrae: error: config key benchmarks.flowers.scoring.k: -3 is not valid under any of the given schemas"


def _last_line_and_no_trace(proc: subprocess.CompletedProcess, message: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert out.rstrip().splitlines()[-1] == message, out
    assert "Traceback" not in out and 'File "' not in out and "common.smk" not in out, out


@pytest.mark.parametrize("how", ["snakemake", "vertebrae run"])
def test_an_invalid_config_ends_with_our_message_and_no_stack_trace(tmp_path, how):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(BAD), encoding="utf-8")
    if how == "snakemake":
        proc = snakemake(tmp_path, "--configfile", "bad.yaml", "-n", check=False)
    else:
        proc = subprocess.run([str(BIN / "vertebrae"), "run", "bad.yaml", "-n"], cwd=tmp_path, env=unactivated_env(),
                              capture_output=True, text=True, timeout=300)
    _last_line_and_no_trace(proc, BAD_MESSAGE)


def test_snakemake_on_an_empty_config_names_the_file_and_what_it_lacks(tmp_path):
    (tmp_path / "empty.yaml").write_text("{}\n", encoding="utf-8")
    proc = snakemake(tmp_path, "--configfile", "empty.yaml", "-n", check=False)
    _last_line_and_no_trace(proc, (
        f"vertebrae: error: config file {tmp_path / 'empty.yaml'}: no benchmark to run: a config needs at least one "
        "of the sections 'benchmarks' (labelled), 'retrieval' (retrieval) or 'zero_shot' (zero-shot), each naming "
        "benchmarks with their dataset and extractors; it is empty"))
