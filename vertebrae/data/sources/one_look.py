"""One look at each data file per planning pass.

Planning a workflow asks the same questions of a sharded source several times (its row count, its identity's
digests, the per-shard counts and digests an embedding plan records); each answer costs a system call or a read
per file, 100,000 of them for a LAION-size WebDataset. Inside ``one_pass()`` (``vertebrae.planning.plan`` opens
one) an answer is computed once and recalled by its key for the rest of the pass; outside a pass nothing is kept,
so a long-lived process (``vertebrae serve``) sees every edit made between two plans.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_PASS: dict[Hashable, Any] | None = None


@contextmanager
def one_pass() -> Iterator[None]:
    """Recall answers within this block (nested blocks share the outermost one's); forget them on leaving."""
    global _PASS
    if _PASS is not None:
        yield
        return
    _PASS = {}
    try:
        yield
    finally:
        _PASS = None


def recall(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or within a pass the value it gave for ``key`` earlier in the pass (an exception is not kept:
    it is raised again by the next try)."""
    if _PASS is None:
        return compute()
    if key not in _PASS:
        _PASS[key] = compute()
    return _PASS[key]


__all__ = ["one_pass", "recall"]
