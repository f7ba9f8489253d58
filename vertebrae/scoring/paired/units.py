"""``PairedUnits``: the per-unit values of one statistic for m candidates on the same n units."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.paired.reducers import REDUCERS, statistic

_OWNER = "PairedUnits"


def _names(value: Any, name: str, minimum: int) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValidationError(f"{_OWNER}.{name} must be a sequence of strings, got {type(value).__name__}")
    names = tuple(value)
    for item in names:
        if not isinstance(item, str):
            raise ValidationError(f"{_OWNER}.{name} must hold strings, got {item!r}")
    if len(names) < minimum:
        raise ValidationError(f"{_OWNER}.{name} must hold at least {minimum}, got {len(names)}")
    seen: set[str] = set()
    duplicates = sorted({item for item in names if item in seen or seen.add(item)})
    if duplicates:
        raise ValidationError(f"{_OWNER}.{name} holds duplicates: {duplicates}")
    return tuple(str.__str__(item) for item in names)


def macro_f1_features(true_classes: Any, predicted_classes: Any, n_classes: int) -> np.ndarray:
    """``(n, 3K)`` float64 features of the ``"macro_f1"`` reducer for one candidate: per sample the one-hot
    ``[tp (K), predicted (K), support (K)]`` of class indices in ``[0, n_classes)``."""
    y = np.asarray(true_classes)
    p = np.asarray(predicted_classes)
    if y.ndim != 1 or p.shape != y.shape or y.dtype.kind not in "iu" or p.dtype.kind not in "iu":
        raise ValidationError(f"macro_f1_features needs two equal-length 1-D integer arrays, got {y.shape} and {p.shape}")
    if y.size and (min(y.min(), p.min()) < 0 or max(y.max(), p.max()) >= n_classes):
        raise ValidationError(f"macro_f1_features: class indices must lie in [0, {n_classes})")
    rows = np.arange(y.size)
    out = np.zeros((y.size, 3 * n_classes))
    out[rows[y == p], y[y == p]] = 1.0
    out[rows, n_classes + p] = 1.0
    out[rows, 2 * n_classes + y] = 1.0
    return out


@dataclass(frozen=True, eq=False)
class PairedUnits:
    """The per-unit feature vectors of one statistic for m >= 2 candidates on the same n >= 1 units.

    ``values`` ``(m, n, F)`` float64, finite; ``strata`` ``(n,)`` integer labels (default: one stratum). The
    statistic is the mean over strata (equal weights, strata in ascending label order) of each stratum's
    reduced value (see ``reducers``): ``"mean"`` (F = 1) the stratum's mean, ``"ratio"`` (F = 2) sum of
    feature 0 / sum of feature 1, ``"macro_f1"`` (F = 3K, one stratum) the macro-F1 of
    :func:`macro_f1_features` rows. ``unit`` names what a unit is ("query", "sample", "class", "repeat"),
    ``statistic`` the metric; both are free text shown in reports.

    Refused (``ValidationError`` naming the candidate and unit id): a non-finite value; for ``"ratio"``, a
    stratum whose denominator total is 0; for ``"macro_f1"``, rows that are not consistent one-hot features or
    a true class that differs between candidates.
    """

    unit: str
    statistic: str
    candidates: tuple[str, ...]
    unit_ids: tuple[str, ...]
    values: np.ndarray
    strata: np.ndarray | None = None
    reducer: str = "mean"

    def __post_init__(self) -> None:
        for name in ("unit", "statistic"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValidationError(f"{_OWNER}.{name} must be a non-empty string, got {value!r}")
        if self.reducer not in REDUCERS:
            raise ValidationError(f"{_OWNER}.reducer must be one of {REDUCERS}, got {self.reducer!r}")
        candidates = _names(self.candidates, "candidates", 2)
        unit_ids = _names(self.unit_ids, "unit_ids", 1)
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "unit_ids", unit_ids)
        m, n = len(candidates), len(unit_ids)
        try:
            values = np.array(self.values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"{_OWNER}.values must be a numeric array: {exc}") from None
        if values.ndim == 2 and self.reducer == "mean":
            values = values[..., None]
        if values.ndim != 3 or values.shape[:2] != (m, n):
            raise ValidationError(f"{_OWNER}.values must have shape ({m} candidates, {n} units, features), "
                                  f"got {values.shape}")
        bad = ~np.isfinite(values)
        if bad.any():
            c, u, _ = np.argwhere(bad)[0]
            raise ValidationError(f"{_OWNER}.values: non-finite value {values[c, u].tolist()} for candidate "
                                  f"{candidates[c]!r} at unit {unit_ids[u]!r}")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "strata", self._check_strata(n))
        self._check_features()

    def _check_strata(self, n: int) -> np.ndarray:
        if self.strata is None:
            strata = np.zeros(n, dtype=np.int64)
        else:
            strata = np.asarray(self.strata)
            if strata.shape != (n,) or (strata.size and strata.dtype.kind not in "iu"):
                raise ValidationError(f"{_OWNER}.strata must be {n} integer labels (one per unit), got shape "
                                      f"{strata.shape} of dtype {strata.dtype}")
            strata = strata.astype(np.int64)
        strata.setflags(write=False)
        return strata

    def _check_features(self) -> None:
        values, f = self.values, self.values.shape[2]
        if self.reducer == "mean" and f != 1:
            raise ValidationError(f"{_OWNER}: reducer 'mean' takes 1 feature per unit, got {f}")
        if self.reducer == "ratio":
            if f != 2:
                raise ValidationError(f"{_OWNER}: reducer 'ratio' takes 2 features per unit (numerator, "
                                      f"denominator), got {f}")
            labels, codes = np.unique(self.strata, return_inverse=True)
            for s, label in enumerate(labels):
                dens = values[:, codes == s, 1].sum(axis=1)
                if (dens == 0).any():
                    c = int(np.flatnonzero(dens == 0)[0])
                    raise ValidationError(f"{_OWNER}: candidate {self.candidates[c]!r} has a zero denominator "
                                          f"total in stratum {int(label)}")
        if self.reducer == "macro_f1":
            self._check_macro_f1()

    def _check_macro_f1(self) -> None:
        values, f = self.values, self.values.shape[2]
        if f % 3 or f < 6:
            raise ValidationError(f"{_OWNER}: reducer 'macro_f1' takes 3K features (K >= 2 classes), got {f}")
        if np.unique(self.strata).size != 1:
            raise ValidationError(f"{_OWNER}: reducer 'macro_f1' takes one stratum only")
        k = f // 3
        tp, predicted, support = values[..., :k], values[..., k:2 * k], values[..., 2 * k:]
        binary = ((values == 0) | (values == 1)).all(axis=2)
        one_hot = (predicted.sum(axis=2) == 1) & (support.sum(axis=2) == 1) & (tp == predicted * support).all(axis=2)
        bad = ~(binary & one_hot)
        if bad.any():
            c, u = np.argwhere(bad)[0]
            raise ValidationError(f"{_OWNER}: candidate {self.candidates[c]!r} at unit {self.unit_ids[u]!r} "
                                  "does not hold one-hot [tp, predicted, support] features")
        differs = (support != support[:1]).any(axis=2)
        if differs.any():
            c, u = np.argwhere(differs)[0]
            raise ValidationError(f"{_OWNER}: candidate {self.candidates[c]!r} has another true class than "
                                  f"{self.candidates[0]!r} at unit {self.unit_ids[u]!r}")

    @property
    def n_units(self) -> int:
        return len(self.unit_ids)

    @property
    def n_features(self) -> int:
        return int(self.values.shape[2])

    def stratum_layout(self) -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: the unit order that makes strata contiguous (stable; strata ascending) and the
        ``S + 1`` boundaries of the strata in that order."""
        order = np.argsort(self.strata, kind="stable")
        _, sizes = np.unique(self.strata, return_counts=True)
        return order, np.concatenate([[0], np.cumsum(sizes)])

    def point_totals(self) -> np.ndarray:
        """``(S, m, F)`` feature totals per stratum; each a 1-D pairwise sum over the stratum's units in unit
        order (the summation ``numpy.mean`` of a metric column performs)."""
        order, bounds = self.stratum_layout()
        m, _, f = self.values.shape
        totals = np.empty((len(bounds) - 1, m, f))
        for s in range(len(bounds) - 1):
            rows = order[bounds[s]:bounds[s + 1]]
            for c in range(m):
                for j in range(f):
                    totals[s, c, j] = np.add.reduce(np.ascontiguousarray(self.values[c, rows, j]))
        return totals

    def point_values(self) -> np.ndarray:
        """``(m,)``: the statistic per candidate on all units."""
        _, bounds = self.stratum_layout()
        sizes = np.diff(bounds).astype(np.float64)[:, None]
        return statistic(self.reducer, self.point_totals(), sizes)
