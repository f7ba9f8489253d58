"""Scoring, merging and reporting subcommands start without importing a deep-learning framework.

Each subcommand runs for real in a fresh interpreter (its arguments generated from the parser, its inputs missing,
so it stops with a vertebrae error after importing everything its dispatch needs); the test then inspects
``sys.modules``. Only the model-running subcommands (fit, embed, plan) may import torch, and only when a model
extractor asks for it.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "torchvision", "transformers", "open_clip", "sentence_transformers", "tensorflow", "jax", "numba")
MODEL_COMMANDS = ("plan", "plan-zero-shot", "fit-extractor", "embed-shard", "embed-retrieval-shard",
                  "embed-zero-shot-shard")
# `profile` writes a Snakemake profile from names alone (nothing to be missing): it is started in a test of its own
# (tests/workflow/test_profiles.py), never here where it would write to the user's config folder
NOT_PROBED = (*MODEL_COMMANDS, "profile")

PROBE = r"""
import argparse, json, sys
from vertebrae import cli

parser = cli._parser()
sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
results = {}
heavy = set(json.loads(sys.argv[1]))
for name, command in sub.choices.items():
    if name in json.loads(sys.argv[2]):
        continue
    argv = [name]
    for action in command._actions:
        if action.option_strings and not action.required:
            continue
        value = str(action.choices[0] if action.choices else (0 if action.type is int else "missing-input.json"))
        argv += [action.option_strings[0], value] if action.option_strings else [value]
    results[name] = argv
print(json.dumps(results))
"""

RUN = r"""
import contextlib, io, json, sys
from vertebrae.cli import main

# one interpreter for all commands: modules only accumulate, so the first command after which a heavy module
# appears is the one that imported it
outcomes = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    outcomes[name] = {"code": code, "stderr": err.getvalue(),
                      "heavy": sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)}
print(json.dumps(outcomes))
"""


def test_scoring_subcommands_do_not_import_torch(tmp_path):
    listing = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps(NOT_PROBED)],
                             capture_output=True, text=True, cwd=tmp_path, check=True)
    commands = json.loads(listing.stdout)
    assert {"score", "report", "score-retrieval", "figures"} <= set(commands)
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(commands), json.dumps(HEAVY)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(outcomes) == set(commands)
    for name, outcome in outcomes.items():
        assert outcome["code"] == 2 and "missing-input.json" in outcome["stderr"], (name, outcome["stderr"][-2000:])
        assert outcome["heavy"] == [], f"vertebrae {name} imported {outcome['heavy']}"


def test_import_vertebrae_is_light():
    code = "import sys, vertebrae, vertebrae.cli; print(sorted(m for m in ('numpy', 'scipy', 'h5py', 'sklearn', 'torch') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


PLAN_RUN = r"""
import json, sys
from vertebrae.cli import main

outcomes = {}
for stage, spec in json.loads(sys.argv[1]).items():
    code = main(["plan", "--spec", spec, "--output", f"plans/{stage}.json"])
    outcomes[stage] = {"code": code, "loaded": sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)}
print(json.dumps(outcomes))
"""


def test_plan_of_a_spec_without_an_extractor_imports_no_array_library(tmp_path):
    """`vertebrae plan` runs once per job spec (about fifty times per workflow): for the specs that name no
    extractor it only checks a fingerprint and writes JSON, without scipy, HDF5, scikit-learn or a model library."""
    from vertebrae.planning import plan

    config = {"benchmarks": {"b": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "declared", "name": "iris", "revision": 1}},
        "extractors": {"p": {"type": "precomputed"}, "s": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA"}]}},
        "compression": [{"method": "pca", "n_components": 2}],
    }}}
    p = plan(config)
    specs = {stage: p.spec_json(p.fingerprints(stage)[0]) for stage in ("protocol", "compress", "score", "report")}
    heavy = HEAVY + ("scipy", "h5py", "sklearn", "pandas")
    proc = subprocess.run([sys.executable, "-c", PLAN_RUN, json.dumps(specs), json.dumps(heavy)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcomes == {stage: {"code": 0, "loaded": []} for stage in specs}
    assert sorted(path.name for path in (tmp_path / "plans").iterdir()) == sorted(f"{stage}.json" for stage in specs)
