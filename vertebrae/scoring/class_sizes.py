"""Classes too small for a metric: refused by name, or left out with a warning where the user opts in.

A metric needs a least number of rows per class (occurrences per label for multi-label targets):

- OverlapIndex: 2 (:data:`OVERLAP_MIN_ROWS`). A class of one row is its own prototype; its per-class score is 0.0
  whatever the embedding, and it drags the macro score down for every candidate alike.
- kNN: ``k + 1`` (a test row of the class can find ``k`` neighbours of its own class), few-shot: the largest
  shot count + 1 (a support and at least one query row), a linear probe: its ``folds`` (each fold tests every
  class); see the metrics' ``check``.

``small_classes`` says what happens to a class present with fewer rows than that: ``"refuse"`` (the default) is a
ValidationError naming the classes, their row counts, what the metric needs and the key that opts in;
``"exclude"`` leaves those classes out of the score (OverlapIndex: out of the macro and weighted aggregation, as
``exclude_classes``; a built-in metric: their rows are neither evaluated nor used for training) with a warning
naming them. Nothing is excluded silently, and a score with no class left is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ConfigError, ValidationError

SMALL_CLASSES = ("refuse", "exclude")
OVERLAP_MIN_ROWS = 2
_LIST = 10


def check_policy(value: Any, owner: str, error: type[Exception] = ConfigError) -> str:
    """``small_classes`` as declared: one of :data:`SMALL_CLASSES`, else ``error`` naming the key."""
    if value not in SMALL_CLASSES:
        raise error(f"{owner}: key 'small_classes' must be one of {list(SMALL_CLASSES)}, got {value!r}")
    return str(value)


def too_small(counts: Mapping[str, int], needed: int) -> list[str]:
    """Class keys present (count > 0) with fewer than ``needed`` rows, in ``counts`` order."""
    return [key for key, n in counts.items() if 0 < n < needed]


def _listing(small: Sequence[str], counts: Mapping[str, int], display: Callable[[str], str]) -> str:
    shown = ", ".join(f"{display(key)!r} ({counts[key]})" for key in small[:_LIST])
    return shown + (f" and {len(small) - _LIST} more" if len(small) > _LIST else "")


def apply_policy(policy: str, counts: Mapping[str, int], needed: int, display: Callable[[str], str], *, what: str,
                 key: str, already: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """``(excluded class keys, warnings)`` for the classes with fewer than ``needed`` rows (see the module
    docstring); ``already``: classes the user excluded by name, which are neither refused nor warned about again.
    ``what`` names the metric and its need (e.g. "kNN with k = 20 needs 21"), ``key`` the opt-in key."""
    small = [c for c in too_small(counts, needed) if c not in set(already)]
    if not small:
        return [], []
    listing = _listing(small, counts, display)
    present = [c for c, n in counts.items() if n > 0 and c not in set(already)]
    if policy == "refuse":
        raise ValidationError(f"{what} rows per class; classes {listing} have fewer (rows in brackets): merge or drop "
                              f"them, or set {key}: exclude to leave them out of this score")
    if len(small) == len(present):
        raise ValidationError(f"{what} rows per class; every class has fewer ({listing}): nothing is left to score")
    return small, [f"{what} rows per class: classes {listing} have fewer and are left out of this score ({key}: "
                   "exclude)"]


def label_on_every_row(counts: Mapping[str, int], n_rows: int, display: Callable[[str], str]) -> list[str]:
    """Warnings for multi-label labels carried by every row: such a label separates nothing, and every other label
    is always seen with it."""
    every = [key for key, n in counts.items() if n_rows > 0 and n == n_rows]
    if not every:
        return []
    shown = ", ".join(repr(display(key)) for key in every[:_LIST])
    return [f"labels {shown} are carried by every one of the {n_rows} rows: they separate nothing (check the label "
            "column, or leave them out)"]


def check_label_pairs(indicator: Any, catalog: Any, present: Sequence[str], excluded: Sequence[str]) -> None:
    """Refuse multi-label targets in which no aggregated label occurs on a row without some other label (every
    row carries the same labels, or each label comes only with all the others): no pair can be told apart."""
    M = sp.csr_matrix(indicator, dtype=np.float64)
    co = sp.csr_matrix(M.T @ M)
    own = co.diagonal()
    columns = {key: i for i, key in enumerate(catalog.keys)}
    wanted = [columns[key] for key in present if key not in set(excluded)]
    for a in wanted:
        row = co.getrow(a)
        covering = sum(1 for b, n in zip(row.indices, row.data) if b != a and own[b] > 0 and n == own[a])
        if covering < len(present) - 1:
            return
    shown = [catalog.display(key) for key in present]
    raise ValidationError(f"multilabel targets: every row that carries one of the labels {shown} carries all of them; "
                          "no label ever occurs without the others, so none can be told apart")


__all__ = ["OVERLAP_MIN_ROWS", "SMALL_CLASSES", "apply_policy", "check_label_pairs", "check_policy",
           "label_on_every_row", "too_small"]
