"""The ``vertebrae`` command: subcommands, one-line errors with exit status 2, a light import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vertebrae import __version__
from vertebrae.cli import main

SUBCOMMANDS = ("plan", "fit-extractor", "embed-shard", "merge-embeddings", "write-protocol", "score", "report",
               "plan-zero-shot", "embed-zero-shot-shard", "merge-zero-shot-embeddings", "write-zero-shot-protocol",
               "compress-zero-shot", "score-zero-shot", "zero-shot-from-artifacts")


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_help_lists_every_subcommand_and_version():
    proc = run_cli("--help")
    assert proc.returncode == 0, proc.stderr
    for name in SUBCOMMANDS:
        assert name in proc.stdout
    assert "--version" in proc.stdout


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"vertebrae {__version__}"


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as info:
        main([name, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: vertebrae {name}" in out
    assert "--plan-json" in out or "--spec" in out


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("vertebrae: error: ")
    return lines[0]


def test_a_spec_that_is_not_json_exits_2_with_one_line(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--spec", "not json", "--output", str(out)]) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert "job spec is not JSON" in line
    assert captured.out == ""
    assert not out.exists()


def test_a_spec_with_a_wrong_fingerprint_names_it(tmp_path, capsys):
    spec = {"stage": "protocol", "fingerprint": "0123456789abcdef", "recipe": {"dataset": "declared:x@1", "target_type": "classification"}}
    assert main(["plan", "--spec", json.dumps(spec), "--output", str(tmp_path / "p.json")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "0123456789abcdef" in line and "does not hash" in line


def test_a_missing_plan_file_names_the_path(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    assert main(["write-protocol", "--plan-json", str(missing), "--output", str(tmp_path / "out.json")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(missing) in line
    assert "not found" in line


def test_errors_exit_2_from_the_real_command(tmp_path):
    proc = run_cli("write-protocol", "--plan-json", "missing.json", "--output", "out.json", cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert "missing.json" in line
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_missing_required_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as info:
        main(["embed-shard", "--plan-json", "p.json"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--shard-index" in err and "--output" in err


_IMPORT_CHECK = (
    "import sys, importlib; importlib.import_module(sys.argv[1]); "
    "print(sorted(m for m in ('sklearn', 'overlapindex', 'torch', 'h5py') if m in sys.modules))"
)


def _heavy_imports(module: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, module], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().replace("'", '"'))


def test_importing_the_cli_imports_no_heavy_library():
    assert _heavy_imports("vertebrae.cli") == []
    # The check can see a heavy import (the stage modules import theirs lazily, in the functions that use them).
    assert "h5py" in _heavy_imports("h5py")
