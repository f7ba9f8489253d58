"""The Snakefile's own imports stay light: every Snakemake parse of it (each dry run, and each cluster job, which
re-parses it) pays them. numpy and scipy load only when a plan needs them (an HDF5 source's shape, say), not to
recognise numpy values (``vertebrae.core.numpy_types``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from workflow_support import REPO

_CHECK = ("import importlib, json, sys\n"
          "for name in json.loads(sys.argv[1]): importlib.import_module(name)\n"
          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'sklearn', 'h5py'})))")


def snakefile_imports() -> list[str]:
    """The ``vertebrae`` modules the Snakefile and its rule files import at their top level."""
    texts = [(REPO / "Snakefile").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    found = []
    for text in texts:
        found += re.findall(r"^import (vertebrae[\w.]*)", text, re.M)
        found += re.findall(r"^from (vertebrae[\w.]*) import", text, re.M)
    return sorted(set(found))


def test_the_snakefile_imports_neither_numpy_nor_scipy():
    modules = snakefile_imports()
    assert "vertebrae.planning.plan_once" in modules and len(modules) >= 5, modules
    out = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(modules)], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == []
    # the check sees such an import when there is one
    out = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(["vertebrae.core.artifacts", "scipy.sparse"])],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["numpy", "scipy"]


def test_numpy_values_are_still_recognised_once_numpy_is_loaded():
    import numpy as np

    from vertebrae.core.fingerprint import canonical_json
    from vertebrae.core.records import is_int, is_real

    assert canonical_json({"a": np.int64(3), "b": np.float32(0.5), "c": np.arange(2), np.str_("d"): np.bool_(True)}) \
        == '{"a":3,"b":0.5,"c":[0,1],"d":true}'
    assert is_int(np.int32(1)) and not is_int(np.bool_(True)) and is_real(np.float64(2.5))


_FROZEN = ("import atexit, gc, runpy, sys\n"
           "atexit.register(lambda: print(f'frozen={gc.get_freeze_count()}', file=sys.stderr))\n"
           "sys.argv = ['snakemake', *sys.argv[1:]]\n"
           "runpy.run_module('snakemake', run_name='__main__')")


def test_the_parsed_workflow_is_frozen_out_of_the_garbage_collectors_passes(tmp_path):
    """The plan and the parsed rules stay out of the full collections a large DAG's construction triggers (a
    10,000-job dry run: ~1 s of ~10.5 s CPU, docs/performance.md): after the parse, the process's permanent
    generation holds them."""
    import numpy as np

    from workflow_support import write_config

    np.savez(tmp_path / "data.npz", X=np.arange(80.0).reshape(40, 2), y=np.repeat([0, 1], 20))
    write_config(tmp_path, {"benchmarks": {"b": {
        "dataset": {"source": {"type": "npz", "path": "data.npz", "features_key": "X", "labels_key": "y"},
                    "identity": {"kind": "content"}},
        "extractors": {"raw": {"type": "precomputed"}}}}})
    proc = subprocess.run([sys.executable, "-c", _FROZEN, "--snakefile", str(REPO / "Snakefile"), "-n", "--quiet",
                           "rules", "--cores", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frozen = int(re.search(r"frozen=(\d+)", proc.stderr).group(1))
    assert frozen > 50_000  # Snakemake's and vertebrae's modules, the plan, the rules: not a handful of objects
