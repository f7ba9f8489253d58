"""The ``vertebrae`` command: subcommands, one-line errors with exit status 2, a light import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vertebrae import __version__
from vertebrae.cli import main
from vertebrae.planning import plan
from vertebrae.cli.commands import snakemake_command
from vertebrae.planning.paths import artifact_path

SUBCOMMANDS = ("plan", "fit-extractor", "embed-shard", "merge-embeddings", "write-protocol", "score", "report",
               "plan-zero-shot", "embed-zero-shot-shard", "merge-zero-shot-embeddings", "write-zero-shot-protocol",
               "compress-zero-shot", "score-zero-shot", "zero-shot-from-artifacts", "retrieval-from-artifacts")


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
    from vertebrae.core.provenance import software  # from this checkout: the version and its git commit

    info = software()
    dirty = ", uncommitted changes" if info["git_dirty"] else ""
    assert capsys.readouterr().out.strip() == f"vertebrae {__version__} (git {info['git_revision'][:12]}{dirty})"


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


# ---- names users type from the spec and the established library (issue 17, item 5) ----------------------------

RETRIEVAL_CONFIG = {
    "embedding": {"shards": 1, "batch_size": 16},
    "retrieval": {"pairs": {
        "dataset": {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
                    "identity": {"kind": "declared", "name": "pairs", "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"},
                       "pca3": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                              "params": {"n_components": 3}}]}},
    }},
}
ZERO_SHOT_CONFIG = {
    "embedding": {"shards": 1, "batch_size": 8},
    "zero_shot": {"colours": {
        "dataset": {"source": {"type": "csv", "path": "rows.csv", "id_column": "id"},
                    "identity": {"kind": "declared", "name": "colours", "revision": "1"}},
        "templates": ["a {label}", "something {label}"],
        "sample_branch": "s", "text_branch": "t",
        "extractors": {"enc": {"type": "callable", "branches": {"s": "cli_enc:samples", "t": "cli_enc:texts"}}},
    }},
}
ENCODERS = '''
import numpy as np

CENTERS = np.random.default_rng(5).normal(size=(3, 4))


def samples(rows):
    return np.asarray(rows, dtype=np.float64)


def texts(rows):
    return np.stack([CENTERS[("red", "green", "blue").index(t.split()[-1])] + 0.01 * len(t) for t in rows])
'''


@pytest.fixture
def artifacts_dir(tmp_path, monkeypatch):
    """A working directory with the data of both configs and their encoders importable."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cli_enc.py").write_text(ENCODERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = np.random.default_rng(1)
    gallery = rng.normal(size=(24, 4)).astype(np.float32)
    targets = rng.integers(0, 24, size=12)
    queries = (gallery[targets] + 0.3 * rng.normal(size=(12, 4))).astype(np.float32)
    np.savez("pair.npz", queries=queries, gallery=gallery, query_ids=np.array([f"q{i}" for i in range(12)]),
             gallery_ids=np.array([f"g{i}" for i in range(24)]))
    Path("qrels.tsv").write_text("".join(f"q{i}\tg{t}\t1\n" for i, t in enumerate(targets)), encoding="utf-8")
    centers = np.random.default_rng(5).normal(size=(3, 4))
    rows = ["id,a,b,c,d,label"] + [",".join([f"r{i}", *(f"{v:.6f}" for v in centers[i % 3] + 0.5 * rng.normal(size=4)),
                                             ("red", "green", "blue")[i % 3]]) for i in range(18)]
    Path("rows.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path


def _ok(*argv) -> None:
    assert main([str(a) for a in argv]) == 0, argv


def _retrieval_scores():
    """Every job of RETRIEVAL_CONFIG through the CLI; returns the report spec's plan path and its score paths."""
    p = plan(RETRIEVAL_CONFIG)
    for fp in p.specs:
        _ok("plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp))
    for fp in p.fingerprints("fit"):
        _ok("fit-extractor", "--plan-json", p.plan_path(fp), "--output", artifact_path("fitted", fp))
    for fp in p.fingerprints("embed"):
        for i, shard in enumerate(p.shard_paths(fp)):
            _ok("embed-retrieval-shard", "--plan-json", p.plan_path(fp), "--side", p.spec(fp)["side"], "--shard-index",
                i, "--output", shard)
        _ok("merge-retrieval-embeddings", "--plan-json", p.plan_path(fp), "--output",
            artifact_path("embedding", fp, protocol="retrieval"), *p.shard_paths(fp))
    for fp in p.fingerprints("retrieval-protocol"):
        _ok("write-retrieval-relevance", "--plan-json", p.plan_path(fp), "--output",
            artifact_path("protocol", fp, protocol="retrieval"))
    for fp in p.fingerprints("score-retrieval"):
        spec = p.spec(fp)
        _ok("score-retrieval", "--plan-json", p.plan_path(fp), "--queries", spec["query"]["path"], "--gallery",
            spec["gallery"]["path"], "--protocol", spec["protocol"]["path"], "--output",
            artifact_path("score", fp, protocol="retrieval"))
    report = p.retrieval_reports["pairs"]
    return p.plan_path(report), p.spec(report)


def test_retrieval_from_artifacts_takes_score_keys_and_the_plans_protocol(artifacts_dir):
    plan_json, spec = _retrieval_scores()
    scores = [c["score"]["path"] for c in spec["candidates"]]
    assert len(scores) == 2
    # ours: --protocol and positional scores
    _ok("retrieval-from-artifacts", "--plan-json", plan_json, "--protocol", spec["protocol"]["path"],
        "--json-output", "ours.json", "--markdown-output", "ours.md", *scores)
    # theirs: --score-key, and no --protocol (the report spec names it)
    _ok("retrieval-from-artifacts", "--plan-json", plan_json, *[a for s in scores for a in ("--score-key", s)],
        "--json-output", "theirs.json", "--markdown-output", "theirs.md")
    assert Path("theirs.json").read_bytes() == Path("ours.json").read_bytes()
    assert Path("theirs.md").read_bytes() == Path("ours.md").read_bytes()
    assert sorted(c["name"] for c in json.loads(Path("ours.json").read_text())["candidate_results"]) == ["pca3", "raw"]
    # keys come first, then positional ones: the plan's candidate order must hold (swapped, the fingerprints differ)
    assert main(["retrieval-from-artifacts", "--plan-json", plan_json, "--score-key", scores[1],
                 "--json-output", "x.json", "--markdown-output", "x.md", scores[0]]) == 2


def test_retrieval_from_artifacts_without_scores_says_how_to_give_them(artifacts_dir, capsys):
    plan_json, _ = _retrieval_scores()
    capsys.readouterr()  # what the score jobs made here logged (their phases lines), not the command under test
    assert main(["retrieval-from-artifacts", "--plan-json", plan_json, "--json-output", "x.json",
                 "--markdown-output", "x.md"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--score-key" in line and "retrieval-from-artifacts" in line


def test_zero_shot_from_artifacts_finds_the_protocol_in_the_plan(artifacts_dir, capsys):
    p = plan(ZERO_SHOT_CONFIG)
    for fp in p.specs:
        _ok("plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp))
    for fp in p.fingerprints("zero-shot-protocol"):
        _ok("write-zero-shot-protocol", "--plan-json", p.plan_path(fp), "--output",
            artifact_path("protocol", fp, protocol="zero_shot"))
    for fp in p.fingerprints("zero-shot-embed"):
        spec = p.spec(fp)
        extra = ("--protocol", spec["protocol"]["path"]) if spec["side"] == "prompts" else ()
        for i, shard in enumerate(p.shard_paths(fp)):
            _ok("embed-zero-shot-shard", "--plan-json", p.plan_path(fp), "--side", spec["side"], "--shard-index", i,
                *extra, "--output", shard)
        _ok("merge-zero-shot-embeddings", "--plan-json", p.plan_path(fp), "--output",
            artifact_path("embedding", fp, protocol="zero_shot", side=spec["side"]), *p.shard_paths(fp))
    for fp in p.fingerprints("score-zero-shot"):
        spec = p.spec(fp)
        _ok("score-zero-shot", "--plan-json", p.plan_path(fp), "--samples", spec["samples"]["path"], "--prompts",
            spec["prompts"]["path"], "--protocol", spec["protocol"]["path"], "--output",
            artifact_path("score", fp, protocol="zero_shot"))
    report = p.zero_shot_reports["colours"]
    spec, plan_json = p.spec(report), p.plan_path(report)
    keys = [a for c in spec["candidates"] for a in ("--score-key", c["score"]["path"])]
    _ok("zero-shot-from-artifacts", "--plan-json", plan_json, "--protocol", spec["protocol"]["path"], *keys,
        "--json-output", "ours.json", "--markdown-output", "ours.md")
    _ok("zero-shot-from-artifacts", "--plan-json", plan_json, *keys, "--json-output", "theirs.json",
        "--markdown-output", "theirs.md")
    assert Path("theirs.json").read_bytes() == Path("ours.json").read_bytes()
    assert json.loads(Path("ours.json").read_text())["candidate_results"][0]["name"] == "enc"
    # without a plan the protocol's path is unknown: a one-line error names the protocol the scores need
    capsys.readouterr()
    assert main(["zero-shot-from-artifacts", *keys, "--benchmark", "colours", "--json-output", "y.json",
                 "--markdown-output", "y.md"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--protocol" in line and "--plan-json" in line and spec["protocol"]["fingerprint"] in line
    assert not Path("y.json").exists()


# ---- commands a user types with a config file (issue 18, problem 10); run for real in tests/workflow ----------

def test_run_and_validate_take_a_config_file(capsys):
    for name in ("run", "validate"):
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0
        assert f"usage: vertebrae {name} [-h] {'[--verbose] [--out DIR] ' if name == 'run' else ''}CONFIG" in capsys.readouterr().out


def test_run_hands_its_arguments_to_snakemake_and_returns_its_exit_status(tmp_path, capfd):
    config = tmp_path / "c.yaml"
    config.write_text("benchmarks: {}\n", encoding="utf-8")
    assert snakemake_command(config, "-n") == [sys.executable, "-m", "snakemake", "--snakefile",
                                               str(Path(__file__).resolve().parents[2] / "Snakefile"), "--configfile",
                                               str(config), "-n"]
    assert main(["run", str(config), "--version"]) == 0
    assert capfd.readouterr().out.strip().startswith("9.")
    assert main(["run", str(config), "--no-such-snakemake-option"]) == 2
    assert "unrecognized arguments: --no-such-snakemake-option" in capfd.readouterr().err


def test_status_show_and_summary_take_their_arguments(tmp_path, capsys):
    usages = {"status": "usage: vertebrae status [-h] [--json] CONFIG",
              "show": "usage: vertebrae show [-h] [--json] CONFIG [BENCHMARK]",
              "summary": "usage: vertebrae summary [-h] --output-csv OUTPUT_CSV"}
    for name, usage in usages.items():
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0
        assert usage in capsys.readouterr().out
    for name in ("status", "show"):
        assert main([name, str(tmp_path / "missing.yaml")]) == 2
        assert f"config file {tmp_path / 'missing.yaml'} not found" in capsys.readouterr().err
    empty = tmp_path / "empty.yaml"
    empty.write_text("seed: 0\n", encoding="utf-8")
    assert main(["status", str(empty)]) == 2  # refused by the plan, before Snakemake is asked
    assert capsys.readouterr().err.startswith("vertebrae: error: config key (top level)")


# ---- the CLI a user meets (issue 30) ------------------------------------------------------------------------------

def test_help_lists_the_user_commands_first_and_the_jobs_under_one_heading():
    out = run_cli("--help").stdout
    jobs_at = out.index("job subcommands")
    user = ["run", "validate", "status", "show", "verify", "leaderboard", "summary", "figures"]
    positions = [out.index(f"\n    {name} ") if f"\n    {name} " in out else out.index(f"\n    {name}\n")
                 for name in user]
    assert positions == sorted(positions) and positions[-1] < jobs_at
    for name in ("embed-shard", "score-retrieval-partial", "merge-zero-shot-embeddings", "report-tables"):
        assert f"\n  {name} " in out[jobs_at:] and f"\n    {name} " not in out[:jobs_at]


def test_several_config_files_merge_as_snakemake_merges_them(tmp_path):
    from vertebrae.cli.commands import merged_config

    (tmp_path / "a.yaml").write_text("seed: 1\nembedding: {batch_size: 8, shards: 2}\nbenchmarks: {x: {k: 1}}\n")
    (tmp_path / "b.yaml").write_text("embedding: {shards: 3}\nbenchmarks: {y: {k: 2}}\n")
    assert merged_config([tmp_path / "a.yaml", tmp_path / "b.yaml"]) == {
        "seed": 1, "embedding": {"batch_size": 8, "shards": 3}, "benchmarks": {"x": {"k": 1}, "y": {"k": 2}}}
    assert snakemake_command([tmp_path / "a.yaml", tmp_path / "b.yaml"], "-n")[-4:] == [
        "--configfile", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "-n"]


def test_an_error_line_cannot_drive_the_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "gone\x1b[2J"]) == 2
    assert capsys.readouterr().err == "vertebrae: error: results directory gone\\x1b[2J: not found\n"
