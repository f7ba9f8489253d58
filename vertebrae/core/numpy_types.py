"""numpy's types for ``isinstance`` checks, without importing numpy: a value can be a numpy object only once numpy is
imported, so modules that merely recognise numpy values (canonical JSON, config records, an estimator's params) ask
:func:`numpy_types`, which gives the ``numpy`` module when it is loaded and otherwise stand-ins that no value is an
instance of. The Snakefile's planning then starts without numpy and scipy (about 0.3 s at every parse: every dry run
and every cluster job)."""

from __future__ import annotations

import sys
from typing import Any


class _Never:
    """A type no value is an instance of."""


class _Absent:
    """numpy's type names, as stand-ins while numpy is not loaded."""

    ndarray = bool_ = integer = floating = str_ = generic = _Never


def numpy_types() -> Any:
    """The ``numpy`` module if loaded, else :class:`_Absent` (``isinstance(x, numpy_types().ndarray)`` is then
    False for every ``x``, as it must be)."""
    return sys.modules.get("numpy") or _Absent


__all__ = ["numpy_types"]
