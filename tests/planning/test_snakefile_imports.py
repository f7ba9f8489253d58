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
