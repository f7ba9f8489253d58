"""Test-wide settings.

BLAS/OpenMP thread counts change floating-point summation order, so results are bit-identical across
processes only at the same thread count. Snakemake runs every job with its ``threads`` (1 here) exported as
OMP_NUM_THREADS and friends; the in-process runs of the test suite use the same single thread, which also
avoids oversubscribing the 2 cores of this machine. Set before numpy loads its BLAS.
"""

import os
import re

import pytest

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_name] = "1"


def pytest_collection_modifyitems(config, items):
    """The workflow tests first (stable otherwise): under pytest-xdist (``make test``: two workers, one file per
    work unit) the longest files start early instead of ending the run on one worker while the other idles."""
    items.sort(key=lambda item: not item.nodeid.startswith("tests/workflow/"))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which plain pytest runs lack
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with one exception: the test files that read the session's default run (the fixture
    ``default_run`` or its copies, tests/workflow/conftest.py) form one work unit, so the run is made once, by the
    worker that holds them, and no other worker waits for it. (pytest-xdist's own ``loadgroup`` marks do not reach
    the scheduler under pytest 9, which no longer reads the node id xdist rewrites.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    readers = {f"tests/workflow/{path.name}" for path in (config.rootpath / "tests" / "workflow").glob("test_*.py")
               if re.search(r"\b(default_run|workdir_copy)\b", path.read_text(encoding="utf-8"))}

    class DefaultRunTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "default_run" if path in readers else path

    return DefaultRunTogether(config, log)
